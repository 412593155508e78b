import { z } from 'zod';
import type { connectorsV1 } from '@rrs/proto';
import type { GatewayClients } from '../clients';
import { defineRoute, type Route } from '../http/route';
import { CrmAuthMode, CrmKind } from '../routes/enums';
import { EXAMPLE_IDS, isoOrNull, orNull } from '../routes/shapes';
import { Id, idOf, OrganizationId, OrgParams } from './routes';

/*
 * An organization's CRM connectors (amoCRM, Bitrix24). Transport only: the connectors service owns every
 * rule (URL and id formats per CRM, credentials matching the kind, locations and flow of the
 * organization) and answers 400 with a pointer in the words of these bodies. Credentials are write-only:
 * they go in and are stored sealed; no response carries them.
 */

const EXAMPLE_CONNECTOR_ID = '0190e0e0-9999-7000-8000-000000000009';
const ConnectorParams = z.object({ organizationId: OrganizationId, connectorId: idOf(EXAMPLE_CONNECTOR_ID) });

const Secret = z.string().max(4096);
const AmoCrmCredentials = z
  .strictObject({
    baseUrl: z.string().min(1).max(2048).meta({ description: 'The account address, `https://<subdomain>.amocrm.ru` (also `.amocrm.com`, `.kommo.com`).', examples: ['https://acme.amocrm.ru'] }),
    longLivedToken: Secret.optional().meta({ description: "A private integration's long-lived token. Give this, or the five OAuth fields." }),
    clientId: z.string().max(200).optional().meta({ description: "OAuth: the integration's ID." }),
    clientSecret: Secret.optional().meta({ description: "OAuth: the integration's secret key." }),
    redirectUri: z.string().max(2048).optional().meta({ description: "OAuth: the integration's redirect URI." }),
    accessToken: Secret.optional().meta({ description: 'OAuth: an access token (refreshed by the service when it expires).' }),
    refreshToken: Secret.optional().meta({ description: 'OAuth: the refresh token that came with it.' }),
  })
  .meta({ description: 'amoCRM API access (write-only: stored encrypted, never returned).' });
const Bitrix24Credentials = z
  .strictObject({
    webhookUrl: z.string().min(1).max(2048).meta({ description: 'The inbound webhook, `https://<portal>/rest/<user id>/<code>/`, with the `crm` permission.', examples: ['https://acme.bitrix24.ru/rest/1/abc123def456/'] }),
    applicationToken: z.string().max(128).optional().meta({ description: "The outbound webhook's application token; may be left out at creation (events are refused until it is set)." }),
  })
  .meta({ description: 'Bitrix24 API access (write-only: stored encrypted, never returned).' });

const WonStageInput = z.strictObject({
  pipelineId: z.string().max(50).optional().meta({ description: 'amoCRM pipeline id, Bitrix24 category id; absent or empty = every pipeline.' }),
  stageId: z.string().min(1).max(50).meta({ description: 'amoCRM status id (142 is won), Bitrix24 STAGE_ID (`WON`, `C1:WON`).' }),
});
const WON_STAGES_DOC = 'The stages that mean won. Empty: amoCRM status 142 in any pipeline, Bitrix24 any stage of the success group.';
const LocationMappingInput = z
  .strictObject({
    field: z.string().min(1).max(100).meta({ description: 'amoCRM: a lead custom field id, or `pipeline_id`. Bitrix24: a deal field such as `UF_CRM_1721244482250` or `CATEGORY_ID`.' }),
    values: z.record(z.string().max(200), z.string().min(1).max(64)).meta({ description: 'CRM value → location id; 1 to 500 entries.' }),
  })
  .meta({ description: "Picks a deal's location by the deal's value of `field`; a value that maps nowhere goes to `locationId`." });
const FieldId = z.string().max(100).nullable().optional();
const WriteBackInput = z
  .strictObject({
    note: z.boolean().optional().meta({ description: 'A note (amoCRM) or timeline comment (Bitrix24) with the rating, feedback and outcome. Default true.' }),
    ratingField: FieldId.meta({ description: 'Deal field that receives the rating 1–5: amoCRM field id, Bitrix24 `UF_CRM_…`; absent or null = none.' }),
    feedbackField: FieldId.meta({ description: 'Deal field that receives the private feedback; absent or null = none.' }),
    reasonField: FieldId.meta({ description: 'Deal field that receives the finish reason; absent or null = none.' }),
  })
  .meta({ description: 'What is written to the deal when the recipient finishes or rates late.' });
const LOCATION_DOC = 'Where review requests go (unless the mapping picks another); a location or a mapping is required.';
const FLOW_DOC = "The flow of the review requests; absent or null = the organization's default flow at the time of each deal.";

const CreateConnectorBody = z.strictObject({
  kind: CrmKind,
  name: z.string().max(200).optional().meta({ description: 'Default: the kind.' }),
  amocrm: AmoCrmCredentials.optional().meta({ description: 'Required when `kind` is `amocrm`, refused otherwise.' }),
  bitrix24: Bitrix24Credentials.optional().meta({ description: 'Required when `kind` is `bitrix24`, refused otherwise.' }),
  wonStages: z.array(WonStageInput).max(50).optional().meta({ description: WON_STAGES_DOC }),
  locationId: Id.nullable().optional().meta({ description: LOCATION_DOC }),
  locationMapping: LocationMappingInput.nullable().optional(),
  flowId: Id.nullable().optional().meta({ description: FLOW_DOC }),
  writeBack: WriteBackInput.optional().meta({ description: 'Default: a note, no field.' }),
});
const UpdateConnectorBody = z.strictObject({
  name: z.string().min(1).max(200).optional(),
  enabled: z.boolean().optional().meta({ description: 'false: events are answered and dropped, nothing is reconciled; true again reconciles at once what was won meanwhile.' }),
  amocrm: AmoCrmCredentials.optional().meta({ description: "Replaces the stored credentials (an amocrm connector's only)." }),
  bitrix24: Bitrix24Credentials.optional().meta({ description: "Replaces the stored credentials (a bitrix24 connector's only), e.g. to add the application token." }),
  wonStages: z.array(WonStageInput).max(50).optional().meta({ description: `Replaces the list. ${WON_STAGES_DOC}` }),
  locationId: Id.nullable().optional().meta({ description: `${LOCATION_DOC} null removes it.` }),
  locationMapping: LocationMappingInput.nullable().optional().meta({ description: 'Replaces the mapping; null removes it.' }),
  flowId: Id.nullable().optional().meta({ description: FLOW_DOC }),
  writeBack: WriteBackInput.optional().meta({ description: 'Replaces the write-back settings; a field left out takes its default.' }),
  rotateInboundSecret: z.boolean().optional().meta({ description: 'true: a new inbound URL is issued (in this response only) and the old one stops working at once.' }),
});

export const ConnectorStatus = z.object({
  lastSyncAt: z.string().nullable().meta({ description: 'End of the last complete reconciliation; null before the first.' }),
  nextSyncAt: z.string().nullable().meta({ description: 'Next scheduled reconciliation; null while disabled.' }),
  lastEventAt: z.string().nullable().meta({ description: 'The last event accepted on the inbound URL.' }),
  lastError: z.string().nullable().meta({ description: 'The last failure talking to the CRM, starting a cascade or writing back; a CRM connection error (`crm_*`) is cleared by the next successful call.' }),
  lastErrorCode: z.string().nullable().meta({ description: 'e.g. `crm_unauthorized`, `crm_rate_limited`, `crm_unavailable`, `deal_without_contact`, `no_location`, `plan_required`, `application_token_missing`.' }),
  lastErrorAt: z.string().nullable(),
  pendingEvents: z.number().int().meta({ description: 'CRM events waiting in the inbox.' }),
  failedEvents: z.number().int().meta({ description: 'CRM events given up on.' }),
  cascadesStarted: z.number().int().meta({ description: 'Cascades started for won deals.' }),
  writeBacksPending: z.number().int(),
  writeBacksDone: z.number().int(),
  writeBacksFailed: z.number().int(),
  lastSuccessAt: z.string().nullable().meta({ description: 'The last time things worked (a deal processed, a write-back done, a reconciliation completed). A connection error (`crm_*`) is cleared by it; `application_token_missing` only by the token being given or an event coming with it; an older deal\'s failure stays, and is past when this is later than `lastErrorAt`.' }),
  lastCascadeAt: z.string().nullable().meta({ description: 'The last cascade started for a won deal.' }),
  lastWriteBackAt: z.string().nullable().meta({ description: 'The last outcome written back to a deal.' }),
});
export const Connector = z.object({
  id: z.string(),
  kind: CrmKind,
  name: z.string(),
  enabled: z.boolean(),
  crmUrl: z.string().meta({ description: 'The CRM account or portal address (never a secret).' }),
  authMode: CrmAuthMode,
  wonStages: z.array(z.object({ pipelineId: z.string().meta({ description: 'Empty = every pipeline.' }), stageId: z.string() })).meta({ description: WON_STAGES_DOC }),
  locationId: z.string().nullable(),
  locationMapping: z.object({ field: z.string(), values: z.record(z.string(), z.string()) }).nullable(),
  flowId: z.string().nullable().meta({ description: "null: the organization's default flow." }),
  writeBack: z.object({ note: z.boolean(), ratingField: z.string().nullable(), feedbackField: z.string().nullable(), reasonField: z.string().nullable() }),
  status: ConnectorStatus,
  activeSince: z.string().meta({ description: 'Deals won before this time are never asked about.' }),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const EXAMPLE_STATUS = {
  lastSyncAt: '2026-05-01T09:05:00.000Z', nextSyncAt: '2026-05-01T09:10:00.000Z', lastEventAt: '2026-05-01T09:03:12.000Z', lastError: null, lastErrorCode: null, lastErrorAt: null,
  pendingEvents: 0, failedEvents: 0, cascadesStarted: 12, writeBacksPending: 1, writeBacksDone: 9, writeBacksFailed: 0,
  lastSuccessAt: '2026-05-01T09:05:00.000Z', lastCascadeAt: '2026-05-01T09:03:13.000Z', lastWriteBackAt: '2026-05-01T09:04:40.000Z',
};
export const EXAMPLE_CONNECTOR = {
  id: EXAMPLE_CONNECTOR_ID, kind: 'amocrm', name: 'Sales', enabled: true, crmUrl: 'https://acme.amocrm.ru', authMode: 'long_lived', wonStages: [],
  locationId: EXAMPLE_IDS.location, locationMapping: null, flowId: null, writeBack: { note: true, ratingField: '777001', feedbackField: null, reasonField: null },
  status: EXAMPLE_STATUS, activeSince: '2026-05-01T09:00:00.000Z', createdAt: '2026-05-01T09:00:00.000Z', updatedAt: '2026-05-01T09:00:00.000Z',
};
export const EXAMPLE_INBOUND_URL = `https://reviews.example.com/hooks/crm/${EXAMPLE_CONNECTOR_ID}/q3Vx9kR2mT7bZ0yLw4sN8cHf1JdPe6GuAiXoKvYr5Ew`;

type WriteBackBody = z.infer<typeof WriteBackInput>;
type MappingBody = z.infer<typeof LocationMappingInput>;

const amoCrmMessage = (c: z.infer<typeof AmoCrmCredentials> | undefined): connectorsV1.AmoCrmCredentials | undefined =>
  c && { baseUrl: c.baseUrl, longLivedToken: c.longLivedToken ?? '', clientId: c.clientId ?? '', clientSecret: c.clientSecret ?? '', redirectUri: c.redirectUri ?? '', accessToken: c.accessToken ?? '', refreshToken: c.refreshToken ?? '' };
const bitrix24Message = (c: z.infer<typeof Bitrix24Credentials> | undefined): connectorsV1.Bitrix24Credentials | undefined => c && { webhookUrl: c.webhookUrl, applicationToken: c.applicationToken ?? '' };
const wonStagesMessage = (stages: Array<z.infer<typeof WonStageInput>>): connectorsV1.WonStage[] => stages.map((s) => ({ pipelineId: s.pipelineId ?? '', stageId: s.stageId }));
/** Absent = unchanged (or none); null = none, which the contract spells as an empty field. */
const mappingMessage = (m: MappingBody | null | undefined): connectorsV1.LocationMapping | undefined => (m === undefined ? undefined : m === null ? { field: '', values: {} } : m);
const writeBackMessage = (w: WriteBackBody | undefined): connectorsV1.WriteBack | undefined =>
  w && { note: w.note ?? true, ratingField: w.ratingField ?? '', feedbackField: w.feedbackField ?? '', reasonField: w.reasonField ?? '' };

const iso = (d: Date | undefined) => (d ? d.toISOString() : '');
const statusJson = (s: connectorsV1.ConnectorStatus | undefined) => ({
  lastSyncAt: isoOrNull(s?.lastSyncAt), nextSyncAt: isoOrNull(s?.nextSyncAt), lastEventAt: isoOrNull(s?.lastEventAt),
  lastError: orNull(s?.lastError ?? ''), lastErrorCode: orNull(s?.lastErrorCode ?? ''), lastErrorAt: isoOrNull(s?.lastErrorAt),
  pendingEvents: s?.pendingEvents ?? 0, failedEvents: s?.failedEvents ?? 0, cascadesStarted: s?.cascadesStarted ?? 0,
  writeBacksPending: s?.writeBacksPending ?? 0, writeBacksDone: s?.writeBacksDone ?? 0, writeBacksFailed: s?.writeBacksFailed ?? 0,
  lastSuccessAt: isoOrNull(s?.lastSuccessAt), lastCascadeAt: isoOrNull(s?.lastCascadeAt), lastWriteBackAt: isoOrNull(s?.lastWriteBackAt),
});
/** Everything the contract shows of a connector; it holds no credential and no inbound secret. */
export const connectorJson = (c: connectorsV1.Connector) => ({
  id: c.id, kind: c.kind, name: c.name, enabled: c.enabled, crmUrl: c.crmUrl, authMode: c.authMode,
  wonStages: c.wonStages.map((s) => ({ pipelineId: s.pipelineId, stageId: s.stageId })),
  locationId: orNull(c.locationId), locationMapping: c.locationMapping ? { field: c.locationMapping.field, values: { ...c.locationMapping.values } } : null, flowId: orNull(c.flowId),
  writeBack: { note: c.writeBack?.note ?? true, ratingField: orNull(c.writeBack?.ratingField ?? ''), feedbackField: orNull(c.writeBack?.feedbackField ?? ''), reasonField: orNull(c.writeBack?.reasonField ?? '') },
  status: statusJson(c.status), activeSince: iso(c.activeSince), createdAt: iso(c.createdAt), updatedAt: iso(c.updatedAt),
});

export function connectorRoutes(clients: GatewayClients): Route[] {
  const { contacts, connectors } = clients;
  /** The connectors service does not know organizations: an unknown one would create or list nothing but say so with 201/200. */
  const requireOrganization = (organizationId: string, metadata: Record<string, string>) => contacts.getOrganization({ id: organizationId }, { metadata });

  return [
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/connectors', operationId: 'createConnector', summary: 'Connect a CRM', tags: ['connectors'], auth: 'adminToken',
      description:
        'Every deal that reaches a won stage in the CRM becomes a review request, and the outcome is written back to the deal (docs/connectors.md). ' +
        'The answer carries `inboundUrl`, the URL to paste into the CRM as its webhook, with an unguessable secret in it: it is in this response only (PATCH with `rotateInboundSecret` issues a new one). ' +
        'The credentials are stored encrypted and never returned.',
      request: { params: OrgParams, body: CreateConnectorBody },
      responses: {
        201: {
          description: 'The connector and its inbound URL.',
          body: z.object({ connector: Connector, inboundUrl: z.string().meta({ description: '`<public base>/hooks/crm/<connector id>/<secret>`; shown only here.' }) }),
          example: { connector: { ...EXAMPLE_CONNECTOR, status: { ...EXAMPLE_STATUS, lastSyncAt: null, lastEventAt: null, cascadesStarted: 0, writeBacksPending: 0, writeBacksDone: 0 } }, inboundUrl: EXAMPLE_INBOUND_URL },
        },
      },
      example: { body: { kind: 'amocrm', name: 'Sales', amocrm: { baseUrl: 'https://acme.amocrm.ru', longLivedToken: 'eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.example' }, locationId: EXAMPLE_IDS.location, writeBack: { note: true, ratingField: '777001' } } },
      handler: async ({ params, body, metadata }) => {
        await requireOrganization(params.organizationId, metadata);
        const r = await connectors.createConnector({
          organizationId: params.organizationId, kind: body.kind, name: body.name ?? '', amocrm: amoCrmMessage(body.amocrm), bitrix24: bitrix24Message(body.bitrix24),
          wonStages: wonStagesMessage(body.wonStages ?? []), locationId: body.locationId ?? '', locationMapping: mappingMessage(body.locationMapping ?? undefined),
          flowId: body.flowId ?? '', writeBack: writeBackMessage(body.writeBack),
        }, { metadata });
        return { body: { connector: connectorJson(r.connector!), inboundUrl: r.inboundUrl } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/connectors', operationId: 'listConnectors', summary: 'List connectors', tags: ['connectors'], auth: 'adminToken',
      request: { params: OrgParams },
      responses: { 200: { description: 'The connectors, oldest first, each with its status.', body: z.object({ connectors: z.array(Connector) }), example: { connectors: [EXAMPLE_CONNECTOR] } } },
      handler: async ({ params, metadata }) => {
        await requireOrganization(params.organizationId, metadata);
        return { body: { connectors: (await connectors.listConnectors({ organizationId: params.organizationId }, { metadata })).connectors.map(connectorJson) } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/connectors/{connectorId}', operationId: 'getConnector', summary: 'Get a connector', tags: ['connectors'], auth: 'adminToken',
      request: { params: ConnectorParams },
      responses: { 200: { description: 'The connector with its status.', body: z.object({ connector: Connector }), example: { connector: EXAMPLE_CONNECTOR } } },
      handler: async ({ params, metadata }) => ({ body: { connector: connectorJson((await connectors.getConnector({ organizationId: params.organizationId, id: params.connectorId }, { metadata })).connector!) } }),
    }),
    defineRoute({
      method: 'PATCH', path: '/organizations/{organizationId}/connectors/{connectorId}', operationId: 'updateConnector', summary: 'Update a connector', tags: ['connectors'], auth: 'adminToken',
      description: 'Changes the fields sent; the others keep their value.',
      request: { params: ConnectorParams, body: UpdateConnectorBody },
      responses: {
        200: {
          description: 'The connector as it is now; `inboundUrl` is the new URL when the secret was rotated, else null.',
          body: z.object({ connector: Connector, inboundUrl: z.string().nullable() }),
          example: { connector: { ...EXAMPLE_CONNECTOR, wonStages: [{ pipelineId: '5512', stageId: '142' }], updatedAt: '2026-05-02T09:00:00.000Z' }, inboundUrl: null },
        },
      },
      example: { body: { wonStages: [{ pipelineId: '5512', stageId: '142' }] } },
      handler: async ({ params, body, metadata }) => {
        const r = await connectors.updateConnector({
          organizationId: params.organizationId, id: params.connectorId, name: body.name, enabled: body.enabled,
          amocrm: amoCrmMessage(body.amocrm), bitrix24: bitrix24Message(body.bitrix24), wonStages: body.wonStages && { stages: wonStagesMessage(body.wonStages) },
          locationId: body.locationId === undefined ? undefined : (body.locationId ?? ''), locationMapping: mappingMessage(body.locationMapping),
          flowId: body.flowId === undefined ? undefined : (body.flowId ?? ''), writeBack: writeBackMessage(body.writeBack), rotateInboundSecret: body.rotateInboundSecret ?? false,
        }, { metadata });
        return { body: { connector: connectorJson(r.connector!), inboundUrl: orNull(r.inboundUrl) } };
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/organizations/{organizationId}/connectors/{connectorId}', operationId: 'deleteConnector', summary: 'Delete a connector', tags: ['connectors'], auth: 'adminToken',
      description: 'Its inbound URL stops working; its inbox, deal mapping and write-back log go with it. Cascades already started run on.',
      request: { params: ConnectorParams },
      responses: { 204: { description: 'Deleted.' } },
      handler: async ({ params, metadata }) => {
        await connectors.deleteConnector({ organizationId: params.organizationId, id: params.connectorId }, { metadata });
        return {};
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/connectors/{connectorId}/status', operationId: 'getConnectorStatus', summary: "A connector's status", tags: ['connectors'], auth: 'adminToken',
      description: 'Last sync, last error, and the counts of the inbox and the write-back log.',
      request: { params: ConnectorParams },
      responses: { 200: { description: 'The status.', body: z.object({ status: ConnectorStatus }), example: { status: EXAMPLE_STATUS } } },
      handler: async ({ params, metadata }) => ({ body: { status: statusJson((await connectors.getConnectorStatus({ organizationId: params.organizationId, id: params.connectorId }, { metadata })).status) } }),
    }),
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/connectors/{connectorId}/sync', operationId: 'syncConnector', summary: 'Reconcile now', tags: ['connectors'], auth: 'adminToken',
      description: 'Lists the won deals the webhooks missed now instead of at the next scheduled time; the result shows in the status.',
      request: { params: ConnectorParams },
      responses: { 202: { description: 'The reconciliation is due now.', body: z.object({ nextSyncAt: z.string() }), example: { nextSyncAt: '2026-05-01T09:06:30.000Z' } } },
      handler: async ({ params, metadata }) => ({ body: { nextSyncAt: iso((await connectors.runSync({ organizationId: params.organizationId, id: params.connectorId }, { metadata })).nextSyncAt) } }),
    }),
  ];
}
