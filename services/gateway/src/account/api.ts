import type { HttpApi } from '../http/api';
import { AUTH_DESCRIPTIONS, sessionGate, visitorGate, type ResolveSession } from '../http/auth';
import { ERROR_CODES, KERNEL_CODES, type ErrorCodeInfo } from '../http/errorCodes';
import { configRoutes, type ConfigRouteDeps } from './configRoutes';
import { developerRoutes } from './developerRoutes';
import { accountConnectorRoutes } from './connectorRoutes';
import { inboxRoutes } from './inboxRoutes';
import { accountMemberRoutes } from './memberRoutes';
import { accountRoutes, type AccountRouteDeps } from './routes';
import { deliverabilityRoute, type DeliverabilityDeps } from '../admin/deliverabilityRoutes';
import { txtLookup } from '../useCases/deliverability';
import { accountLifecycleRoutes } from '../admin/lifecycleRoutes';
import { accountErasureRoutes } from '../admin/erasureRoutes';

const TAGS: Record<string, string> = {
  session: 'Signing in and out, and invitations.',
  members: "The organization's people.",
  'api-keys': 'The developer section: API keys of the public API.',
  webhooks: 'The developer section: webhook endpoints, their delivery log, test events and replays (the public API\'s webhook operations).',
  locations: 'Locations: what a send names, with their public review links.',
  flows: 'Flows: the steps a cascade goes through.',
  cascades: 'Cascades: the list, one cascade, and sending by hand.',
  ratings: 'The ratings inbox as a workflow: private feedback, assignment, notes, resolution, replies to the customer.',
  alerts: 'Rating alerts: the threshold, the response target and working hours, who gets them by email, and the staff chats linked through the official bots.',
  overview: 'The funnel and the ratings over a date range.',
  templates: 'Message templates per channel.',
  channels: 'Channels: configured, running, available; the SMS balance.',
  settings: "The organization's own settings (send window, cooldown, consent, …) and its plan.",
  connectors: 'CRM connectors: amoCRM through its OAuth consent, Bitrix24 with its webhooks; their status.',
};

const ACCOUNT_ERROR_CATALOG: Record<string, ErrorCodeInfo> = {
  ...Object.fromEntries(KERNEL_CODES.map((code) => [code, ERROR_CODES[code]])),
  ...AUTH_DESCRIPTIONS.session.codes,
};

/**
 * The account API (`/account/v1`): what the console (`/app`) calls, as a member of one organization
 * signed in with a session cookie (docs/console.md). Its document is `/account/v1/openapi.json`.
 * POSTs take an optional Idempotency-Key, handed to the owning service as on the public API.
 */
export function accountApi(deps: AccountRouteDeps & ConfigRouteDeps & { resolveSession?: ResolveSession; deliverability?: DeliverabilityDeps }): HttpApi {
  const resolveSession: ResolveSession = deps.resolveSession ?? ((sessionToken) => deps.clients.contacts.resolveSession({ sessionToken }));
  return {
    basePath: '/account/v1',
    routes: [
      ...accountRoutes(deps),
      ...inboxRoutes(deps),
      ...configRoutes(deps),
      ...accountLifecycleRoutes(deps.clients),
      ...accountErasureRoutes(deps.clients),
      ...accountMemberRoutes(deps),
      ...developerRoutes(deps),
      ...accountConnectorRoutes(deps),
      // The console's Channels page: the same check as the admin API's, read by every role.
      deliverabilityRoute(deps.deliverability ?? { channelCatalog: deps.channelCatalog, lookup: txtLookup() }, 'session', '/channels/email/deliverability'),
    ],
    gates: { session: sessionGate(resolveSession, deps.publicBaseUrl), visitor: visitorGate(deps.publicBaseUrl) },
    idempotencyKeys: true,
    document: {
      title: 'Review-Request account API',
      version: '1.0.0',
      description:
        "What the organization's web console calls, as a signed-in member: sign-in, API keys, locations, flows, message templates, channels, settings, cascades and sending by hand. Every call is scoped to the member's organization. Authorized by the session cookie; state-changing calls also send the session's CSRF token as `X-CSRF-Token`, and a `viewer` may only read. Errors are RFC 9457 `application/problem+json` with a stable `code`, like the public API.",
      serverUrl: '/account/v1',
      tags: TAGS,
      errorCatalog: ACCOUNT_ERROR_CATALOG,
    },
  };
}
