import { z } from 'zod';
import { idOf } from '../admin/routes';
import { Connector, connectorJson, EXAMPLE_CONNECTOR, EXAMPLE_INBOUND_URL } from '../admin/connectorRoutes';
import type { GatewayClients } from '../clients';
import type { RouteError } from '../http/errorCodes';
import { defineRoute, type Route } from '../http/route';
import { EXAMPLE_IDS } from '../routes/shapes';

/*
 * Connecting a CRM from the console (docs/connectors.md, "Connecting from the console"): owners and admins
 * connect amoCRM through its OAuth consent and Bitrix24 with its inbound webhook and the outbound
 * webhook's application token, see each connector's status, and issue a new inbound URL. Transport only:
 * the connectors service owns every rule, the state and the code exchange; the session gate refuses a
 * viewer's changes (403 `read_only_role`).
 */

const ConnectorParams = z.object({ connectorId: idOf(EXAMPLE_CONNECTOR.id) });
const Settings = {
  name: z.string().max(200).optional().meta({ description: 'Default: the CRM.' }),
  locationId: z.string().min(1).max(64).meta({ description: 'Where the review requests of won deals go.' }),
  flowId: z.string().max(64).optional().meta({ description: "Default: the organization's default flow at the time of each deal." }),
};
const Connected = z.object({ connector: Connector, inboundUrl: z.string().meta({ description: "The URL to paste into the CRM's webhook settings; shown only here." }) });

const NOT_CONFIGURED: RouteError = { status: 409, code: 'amocrm_oauth_not_configured', description: 'This service has no amoCRM integration of its own (its operator sets AMOCRM_CLIENT_ID): amoCRM is connected by the operator with a token.' };
const STATE_INVALID: RouteError = { status: 404, code: 'oauth_state_invalid', description: 'The OAuth state is unknown, expired (20 minutes), already used, or another member\'s: start connecting again. Nothing was created.' };
const CODE_REFUSED: RouteError = { status: 400, code: 'oauth_code_refused', description: 'amoCRM refused the authorization code (used or expired): start connecting again. Nothing was created.' };

export function accountConnectorRoutes(deps: { clients: GatewayClients }): Route[] {
  const { connectors } = deps.clients;
  return [
    defineRoute({
      method: 'GET', path: '/connectors', operationId: 'listConnectors', summary: "The organization's CRM connectors", tags: ['connectors'], auth: 'session',
      responses: { 200: { description: 'Oldest first, each with its status: the last event, the last cascade and write-back, the last error and whether things worked since.', body: z.object({ connectors: z.array(Connector) }), example: { connectors: [EXAMPLE_CONNECTOR] } } },
      handler: async ({ principal, metadata }) => ({ body: { connectors: (await connectors.listConnectors({ organizationId: principal.organization.id }, { metadata })).connectors.map(connectorJson) } }),
    }),
    defineRoute({
      method: 'POST', path: '/connectors/amocrm/authorize', operationId: 'authorizeAmoCrm', summary: "Start connecting amoCRM: amoCRM's consent page", tags: ['connectors'], auth: 'session',
      description:
        "Owners and admins. Answers amoCRM's authorization page for the service's integration with a one-time state (20 minutes, this member's only); the console opens it, and amoCRM sends the browser back to the console with a code, which `POST /connectors/amocrm/complete` exchanges. The location and flow are checked now.",
      request: { body: z.strictObject(Settings) },
      responses: { 200: { description: "Where to send the browser.", body: z.object({ authorizeUrl: z.string(), expiresAt: z.string() }), example: { authorizeUrl: 'https://www.amocrm.ru/oauth?client_id=0f3c2a1e-7d7e-4a8e-9c61-2f0b5a6c9e10&state=q3Vx9kR2mT7bZ0yLw4sN8cHf1JdPe6GuAiXoKvYr5Ew&mode=post_message', expiresAt: '2026-05-01T09:20:00.000Z' } } },
      errors: [NOT_CONFIGURED],
      example: { body: { name: 'Sales', locationId: EXAMPLE_IDS.location } },
      handler: async ({ body, principal, metadata }) => {
        const r = await connectors.startAmoCrmOAuth({ organizationId: principal.organization.id, memberId: principal.member.id, name: body.name ?? '', locationId: body.locationId, flowId: body.flowId ?? '' }, { metadata });
        return { body: { authorizeUrl: r.authorizeUrl, expiresAt: r.expiresAt ? r.expiresAt.toISOString() : '' } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/connectors/amocrm/complete', operationId: 'completeAmoCrm', summary: 'Finish connecting amoCRM with the code it sent back', tags: ['connectors'], auth: 'session',
      description: "What amoCRM's redirect carried (`state`, `code`, `referer`): the code is exchanged for tokens, stored encrypted, and the connector created. The inbound URL to paste into amoCRM's webhook settings is in this answer only.",
      request: { body: z.strictObject({ state: z.string().min(1).max(200), code: z.string().min(1).max(4096), referer: z.string().min(1).max(255) }) },
      responses: { 201: { description: 'Connected.', body: Connected, example: { connector: { ...EXAMPLE_CONNECTOR, authMode: 'oauth' }, inboundUrl: EXAMPLE_INBOUND_URL } } },
      errors: [NOT_CONFIGURED, STATE_INVALID, CODE_REFUSED],
      example: { body: { state: 'q3Vx9kR2mT7bZ0yLw4sN8cHf1JdPe6GuAiXoKvYr5Ew', code: 'def50200a1b2c3', referer: 'acme.amocrm.ru' } },
      handler: async ({ body, principal, metadata }) => {
        const r = await connectors.completeAmoCrmOAuth({ organizationId: principal.organization.id, memberId: principal.member.id, ...body }, { metadata });
        return { body: { connector: connectorJson(r.connector!), inboundUrl: r.inboundUrl } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/connectors/bitrix24', operationId: 'connectBitrix24', summary: 'Connect Bitrix24', tags: ['connectors'], auth: 'session',
      description:
        "Owners and admins give the portal's inbound webhook (`https://<portal>/rest/<user id>/<code>/`, permission `crm`). The answer's inbound URL goes into Bitrix24's outbound webhook (events ONCRMDEALUPDATE, ONCRMDEALADD); then `PUT /connectors/{id}/application-token` with the token Bitrix24 shows for it.",
      request: { body: z.strictObject({ webhookUrl: z.string().min(1).max(2048), ...Settings }) },
      responses: { 201: { description: 'Connected; events are refused until the application token is given.', body: Connected, example: { connector: { ...EXAMPLE_CONNECTOR, kind: 'bitrix24', authMode: 'webhook', crmUrl: 'https://acme.bitrix24.ru' }, inboundUrl: EXAMPLE_INBOUND_URL } } },
      example: { body: { webhookUrl: 'https://acme.bitrix24.ru/rest/1/abc123def456/', locationId: EXAMPLE_IDS.location } },
      handler: async ({ body, principal, metadata }) => {
        const r = await connectors.createConnector(
          {
            organizationId: principal.organization.id, kind: 'bitrix24', name: body.name ?? '', amocrm: undefined, bitrix24: { webhookUrl: body.webhookUrl, applicationToken: '' },
            wonStages: [], locationId: body.locationId, locationMapping: undefined, flowId: body.flowId ?? '', writeBack: undefined,
          },
          { metadata },
        );
        return { body: { connector: connectorJson(r.connector!), inboundUrl: r.inboundUrl } };
      },
    }),
    defineRoute({
      method: 'PUT', path: '/connectors/{connectorId}/application-token', operationId: 'setBitrix24ApplicationToken', summary: "Give a Bitrix24 connector its outbound webhook's token", tags: ['connectors'], auth: 'session',
      description: 'The token Bitrix24 shows for the outbound webhook; from now on its events are accepted (and a past `application_token_missing` is cleared).',
      request: { params: ConnectorParams, body: z.strictObject({ applicationToken: z.string().min(1).max(128) }) },
      responses: { 200: { description: 'The connector as it is now.', body: z.object({ connector: Connector }), example: { connector: { ...EXAMPLE_CONNECTOR, kind: 'bitrix24', authMode: 'webhook' } } } },
      example: { body: { applicationToken: 'k3j4h5g6f7d8s9a0' } },
      handler: async ({ params, body, principal, metadata }) => {
        const r = await connectors.updateConnector(
          {
            organizationId: principal.organization.id, id: params.connectorId, amocrm: undefined, bitrix24: { webhookUrl: '', applicationToken: body.applicationToken },
            wonStages: undefined, locationMapping: undefined, writeBack: undefined, rotateInboundSecret: false,
          },
          { metadata },
        );
        return { body: { connector: connectorJson(r.connector!) } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/connectors/{connectorId}/inbound-url', operationId: 'rotateConnectorInboundUrl', summary: 'Issue a new inbound URL', tags: ['connectors'], auth: 'session',
      description: 'A new URL to paste into the CRM, shown only here; the old one stops working at once.',
      request: { params: ConnectorParams },
      responses: { 200: { description: 'The new inbound URL.', body: z.object({ inboundUrl: z.string() }), example: { inboundUrl: EXAMPLE_INBOUND_URL } } },
      handler: async ({ params, principal, metadata }) => {
        const r = await connectors.updateConnector(
          { organizationId: principal.organization.id, id: params.connectorId, amocrm: undefined, bitrix24: undefined, wonStages: undefined, locationMapping: undefined, writeBack: undefined, rotateInboundSecret: true },
          { metadata },
        );
        return { body: { inboundUrl: r.inboundUrl } };
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/connectors/{connectorId}', operationId: 'deleteConnector', summary: 'Disconnect a CRM', tags: ['connectors'], auth: 'session',
      description: 'Its inbound URL stops working; cascades already started run on.',
      request: { params: ConnectorParams },
      responses: { 204: { description: 'Disconnected.' } },
      handler: async ({ params, principal, metadata }) => {
        await connectors.deleteConnector({ organizationId: principal.organization.id, id: params.connectorId }, { metadata });
        return {};
      },
    }),
  ];
}
