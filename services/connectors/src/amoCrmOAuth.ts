import { createHash, randomBytes } from 'node:crypto';
import type { connectorsV1 } from '@rrs/proto';
import { ConflictError, InvalidError, NotFoundError, UnavailableError, type Pool } from '@rrs/runtime';
import type { AmoCrmOAuthApp } from './config';
import type { Connectors } from './connectors';
import { crmErrorOf, crmRequest, type CrmHttpOptions } from './crm/http';

/*
 * Connecting amoCRM from the console through amoCRM's OAuth consent (docs/connectors.md, "Connecting
 * from the console"; amoCRM: oauth/step-by-step). The console sends the owner to amoCRM's authorization
 * page with the service's integration id and a one-time `state`; amoCRM redirects back to the
 * integration's Redirect URI (the console) with `code`, `state` and `referer` (the account's host); the
 * code is exchanged at `https://<referer>/oauth2/access_token` (grant_type=authorization_code) and the
 * connector is created with the tokens, sealed as any connector's credentials.
 */

/** How long a state is accepted: amoCRM's authorization code itself lives 20 minutes. */
export const OAUTH_STATE_LIFETIME_MS = 20 * 60_000;
const STATE = /^[A-Za-z0-9_-]{43}$/;
const hash = (state: string) => createHash('sha256').update(state, 'utf8').digest();

const notConfigured = () => new ConflictError('amocrm_oauth_not_configured', 'this service has no amoCRM integration of its own (AMOCRM_CLIENT_ID); connect amoCRM with a token instead');

export interface AmoCrmOAuthDeps {
  pool: Pool;
  connectors: Connectors;
  app?: AmoCrmOAuthApp;
  allowHttpCrm: boolean;
  http: Omit<CrmHttpOptions, 'account'>;
}

/**
 * amoCRM's authorization page for this organization and member, with a new state; the connector's
 * location and flow are checked now, so a wrong one is refused before anyone leaves for amoCRM.
 */
export async function startAmoCrmOAuth(deps: AmoCrmOAuthDeps, request: connectorsV1.StartAmoCrmOAuthRequest): Promise<connectorsV1.StartAmoCrmOAuthResponse> {
  if (!deps.app) throw notConfigured();
  await deps.connectors.checkNewSettings(request.organizationId, { locationId: request.locationId, flowId: request.flowId });
  const state = randomBytes(32).toString('base64url');
  const { rows } = await deps.pool.query<{ expires_at: Date }>(
    `INSERT INTO amocrm_oauth_states (state_hash, organization_id, member_id, name, location_id, flow_id, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, now() + $7 * interval '1 millisecond') RETURNING expires_at`,
    [hash(state), request.organizationId, request.memberId, request.name.trim() || 'amoCRM', request.locationId, request.flowId, OAUTH_STATE_LIFETIME_MS],
  );
  const url = new URL(deps.app.authorizeUrl);
  url.searchParams.set('client_id', deps.app.clientId);
  url.searchParams.set('state', state);
  url.searchParams.set('mode', 'post_message');
  return { authorizeUrl: url.toString(), expiresAt: rows[0].expires_at };
}

/** The account address of amoCRM's `referer` (a host such as `example.amocrm.ru`; a loopback fake over http in development). */
function accountUrlOf(referer: string, allowHttp: boolean): string {
  if (!/^[A-Za-z0-9.-]+(:\d{1,5})?$/.test(referer)) throw InvalidError.field('/referer', "the account's host amoCRM redirected with");
  const loopback = /^(127\.0\.0\.1|localhost)(:\d+)?$/.test(referer);
  return `${allowHttp && loopback ? 'http' : 'https'}://${referer}`;
}

/**
 * The redirect came back: the state must be this organization's and member's, unused and in time (else
 * 404 `oauth_state_invalid`, nothing created); the code is exchanged for tokens (a refused code: 400
 * `oauth_code_refused`) and the connector created with them.
 */
export async function completeAmoCrmOAuth(deps: AmoCrmOAuthDeps, request: connectorsV1.CompleteAmoCrmOAuthRequest): Promise<connectorsV1.CompleteAmoCrmOAuthResponse> {
  const app = deps.app;
  if (!app) throw notConfigured();
  if (!request.code || request.code.length > 4096) throw InvalidError.field('/code', 'the authorization code amoCRM redirected with');
  const baseUrl = accountUrlOf(request.referer, deps.allowHttpCrm);
  const invalidState = () => new NotFoundError('oauth state', { code: 'oauth_state_invalid', message: 'unknown, expired or used OAuth state: start connecting amoCRM again' });
  if (!STATE.test(request.state)) throw invalidState();
  const { rows } = await deps.pool.query<{ name: string; location_id: string; flow_id: string }>(
    `UPDATE amocrm_oauth_states SET used_at = now()
      WHERE state_hash = $1 AND organization_id = $2 AND member_id = $3 AND used_at IS NULL AND expires_at > now()
      RETURNING name, location_id, flow_id`,
    [hash(request.state), request.organizationId, request.memberId],
  );
  const started = rows[0];
  if (!started) throw invalidState();
  const res = await crmRequest(
    `${baseUrl}/oauth2/access_token`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ client_id: app.clientId, client_secret: app.clientSecret, grant_type: 'authorization_code', code: request.code, redirect_uri: app.redirectUri }),
    },
    { ...deps.http, account: baseUrl },
    (r) => r.status === 429,
  );
  const body = res.body as { access_token?: unknown; refresh_token?: unknown } | null;
  if (res.status !== 200 || typeof body?.access_token !== 'string' || typeof body.refresh_token !== 'string') {
    const error = crmErrorOf(res, 'amoCRM code exchange');
    if (res.status >= 400 && res.status < 500 && res.status !== 429) throw new InvalidError([{ pointer: '/code', detail: 'amoCRM refused the authorization code (expired or used): connect again' }], { code: 'oauth_code_refused', message: error.message });
    throw new UnavailableError(`amoCRM could not exchange the code now: ${error.message}`);
  }
  const { response } = await deps.connectors.create({
    organizationId: request.organizationId, kind: 'amocrm', name: started.name,
    amocrm: { baseUrl, longLivedToken: '', clientId: app.clientId, clientSecret: app.clientSecret, redirectUri: app.redirectUri, accessToken: body.access_token, refreshToken: body.refresh_token },
    locationId: started.location_id, flowId: started.flow_id,
  });
  return { connector: response.connector, inboundUrl: response.inboundUrl };
}
