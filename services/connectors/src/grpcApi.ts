import { idempotencyFromMetadata } from '@rrs/idempotency';
import { connectorsV1 } from '@rrs/proto';
import { unaryService, type Logger } from '@rrs/runtime';
import { completeAmoCrmOAuth, startAmoCrmOAuth, type AmoCrmOAuthDeps } from './amoCrmOAuth';
import type { Connectors } from './connectors';
import { connectorMessage, statusMessage } from './messages';
import type { AmoCrmCredentialsInput, Bitrix24CredentialsInput, LocationMapping } from './model';

export const CONNECTORS_SERVICE_NAME = 'rrs.connectors.v1.ConnectorsService';

const amoInput = (c: connectorsV1.AmoCrmCredentials | undefined): AmoCrmCredentialsInput | undefined =>
  c && { baseUrl: c.baseUrl, longLivedToken: c.longLivedToken, clientId: c.clientId, clientSecret: c.clientSecret, redirectUri: c.redirectUri, accessToken: c.accessToken, refreshToken: c.refreshToken };
const bitrixInput = (c: connectorsV1.Bitrix24Credentials | undefined): Bitrix24CredentialsInput | undefined => c && { webhookUrl: c.webhookUrl, applicationToken: c.applicationToken };
const mappingInput = (m: connectorsV1.LocationMapping | undefined): LocationMapping | null | undefined => (m === undefined ? undefined : m.field === '' ? null : { field: m.field, values: { ...m.values } });

/** gRPC transport of connector management: maps messages to domain calls and back, nothing else. */
export function connectorsGrpcService(connectors: Connectors, oauth: AmoCrmOAuthDeps, logger: Logger) {
  const withCounts = async (c: Awaited<ReturnType<Connectors['get']>>) => connectorMessage(c, await connectors.counts(c.id));
  return {
    name: CONNECTORS_SERVICE_NAME,
    definition: connectorsV1.ConnectorsServiceService,
    implementation: unaryService<connectorsV1.ConnectorsServiceServer>(CONNECTORS_SERVICE_NAME, connectorsV1.ConnectorsServiceService, {
      async createConnector(req, md) {
        const { response } = await connectors.create(
          {
            organizationId: req.organizationId,
            kind: req.kind,
            name: req.name,
            amocrm: amoInput(req.amocrm),
            bitrix24: bitrixInput(req.bitrix24),
            wonStages: req.wonStages,
            locationId: req.locationId,
            locationMapping: mappingInput(req.locationMapping),
            flowId: req.flowId,
            writeBack: req.writeBack,
          },
          idempotencyFromMetadata(md, req.organizationId),
        );
        return response;
      },
      async getConnector(req) {
        return { connector: await withCounts(await connectors.get(req.organizationId, req.id)) };
      },
      async listConnectors(req) {
        return { connectors: await Promise.all((await connectors.list(req.organizationId)).map(withCounts)) };
      },
      async updateConnector(req) {
        const updated = await connectors.update(req.organizationId, req.id, {
          name: req.name,
          enabled: req.enabled,
          amocrm: amoInput(req.amocrm),
          bitrix24: bitrixInput(req.bitrix24),
          wonStages: req.wonStages?.stages,
          locationId: req.locationId,
          locationMapping: mappingInput(req.locationMapping),
          flowId: req.flowId,
          writeBack: req.writeBack,
          rotateInboundSecret: req.rotateInboundSecret,
        });
        return { connector: await withCounts(updated.connector), inboundUrl: updated.inboundUrl };
      },
      async deleteConnector(req) {
        await connectors.delete(req.organizationId, req.id);
        return {};
      },
      async getConnectorStatus(req) {
        const connector = await connectors.get(req.organizationId, req.id);
        return { status: statusMessage(connector, await connectors.counts(connector.id)) };
      },
      async runSync(req) {
        return { nextSyncAt: await connectors.runSync(req.organizationId, req.id) };
      },
      startAmoCrmOAuth: (req) => startAmoCrmOAuth(oauth, req),
      completeAmoCrmOAuth: (req) => completeAmoCrmOAuth(oauth, req),
    }, logger),
  };
}
