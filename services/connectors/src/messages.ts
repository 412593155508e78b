import { connectorsV1 } from '@rrs/proto';
import type { Connector } from './model';

export interface ConnectorStatusCounts {
  pendingEvents: number;
  failedEvents: number;
  cascadesStarted: number;
  writeBacksPending: number;
  writeBacksDone: number;
  writeBacksFailed: number;
  lastCascadeAt: Date | undefined;
  lastWriteBackAt: Date | undefined;
}

const opt = (d: Date | null): Date | undefined => d ?? undefined;

export function statusMessage(c: Connector, counts: ConnectorStatusCounts): connectorsV1.ConnectorStatus {
  return {
    lastSyncAt: opt(c.lastSyncAt),
    nextSyncAt: c.enabled ? c.nextSyncAt : undefined,
    lastEventAt: opt(c.lastEventAt),
    lastError: c.lastError ?? '',
    lastErrorCode: c.lastErrorCode ?? '',
    lastErrorAt: opt(c.lastErrorAt),
    lastSuccessAt: opt(c.lastSuccessAt),
    ...counts,
  };
}

/** A connector as the contract shows it: everything but its credentials and inbound secret. */
export function connectorMessage(c: Connector, counts: ConnectorStatusCounts): connectorsV1.Connector {
  return {
    id: c.id,
    organizationId: c.organizationId,
    kind: c.kind,
    name: c.name,
    enabled: c.enabled,
    crmUrl: c.crmUrl,
    authMode: c.authMode,
    wonStages: c.settings.wonStages,
    locationId: c.settings.locationId,
    locationMapping: c.settings.locationMapping ?? undefined,
    flowId: c.settings.flowId,
    writeBack: c.settings.writeBack,
    status: statusMessage(c, counts),
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
    activeSince: c.activeSince,
  };
}
