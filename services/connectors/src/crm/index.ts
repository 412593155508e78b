import type { ConnectorPolicy } from '../config';
import type { Connectors } from '../connectors';
import type { Connector } from '../model';
import { AmoCrmClient } from './amocrm';
import { Bitrix24Client } from './bitrix24';
import type { RequestPacer } from './http';
import type { CrmClient } from './types';

export * from './types';
export { createRequestPacer, type RequestPacer } from './http';

export interface CrmClients {
  /** The CRM API of a connector, with its credentials as stored now. */
  for(connector: Connector): CrmClient;
}

export function crmClients(connectors: Connectors, pacer: RequestPacer, policy: ConnectorPolicy): CrmClients {
  return {
    for(connector) {
      const http = {
        pacer,
        // The pace is the account's, shared by every connector of it.
        account: connector.crmUrl,
        perSecond: connector.kind === 'amocrm' ? policy.amocrmPerSecond : policy.bitrix24PerSecond,
        timeoutMs: policy.httpTimeoutMs,
        maxRateWaitMs: policy.maxRateWaitMs,
      };
      if (connector.kind === 'amocrm') return new AmoCrmClient(connector.crmUrl, connectors.amoAuthSource(connector), http);
      const credentials = connectors.credentials(connector);
      if (credentials.kind !== 'bitrix24') throw new Error(`connector ${connector.id} has no Bitrix24 credentials`);
      return new Bitrix24Client(credentials.webhookUrl, http);
    },
  };
}
