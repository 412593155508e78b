import { SCOPES } from '@rrs/proto';
import type { GatewayClients } from '../clients';
import type { Principal, SessionPrincipal } from '../http/auth';
import type { Route } from '../http/route';
import { webhookRoutes } from '../routes/webhooks';

/*
 * The console's developer section beyond API keys: the organization's webhook endpoints and their
 * delivery log. These are the public API's webhook routes themselves (routes/webhooks.ts: the same
 * schemas, examples, errors and gRPC calls), authorized by the session instead of an API key. A member
 * may subscribe to every event type (an API key only to those its scopes may read); a viewer reads only
 * (the session gate answers 403 `read_only_role` to anything else).
 */

/** What the webhook handlers read of their principal, for a signed-in member of the organization. */
const asWebhookPrincipal = (session: SessionPrincipal): Principal => ({ organization: session.organization, keyId: '', scopes: [...SCOPES] });

export function developerRoutes(deps: { clients: GatewayClients }): Route[] {
  return webhookRoutes(deps).map((route) => ({
    ...route,
    auth: 'session',
    scope: null,
    rateLimited: false,
    handler: (ctx) => route.handler({ ...ctx, principal: asWebhookPrincipal(ctx.principal as SessionPrincipal) }),
  }));
}
