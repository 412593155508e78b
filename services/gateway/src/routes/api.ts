import { apiKeyGate, type Authenticator } from '../http/auth';
import type { HttpApi } from '../http/api';
import { ERROR_CODES } from '../http/errorCodes';
import { serverUrlFor } from '../http/openapi';
import type { RouteSource } from '../http/route';
import type { RateLimiter } from '../rateLimit';
import type { FailureLimiter } from '../addressLimits';
import { PUBLIC_WEBHOOKS } from './events';

export const PUBLIC_API_DESCRIPTION = `Hand customers over from a CRM and have review requests sent to them through a cascade of channels (email, SMS, MAX, Telegram), or through one channel.

Authenticate with \`Authorization: Bearer <API key>\`. Every error is RFC 9457 \`application/problem+json\` with a stable \`code\` and a \`requestId\`; each operation lists, per status, the codes it can answer. Every POST accepts an \`Idempotency-Key\`; a replayed answer carries \`Idempotent-Replayed: true\`. Rate-limited operations carry \`RateLimit\` and \`RateLimit-Policy\` headers.

Every status, reason and key is an enum of this document (\`components.schemas\`); a value may be added in a later release of the same version, so a client should treat an unknown value as it would an unknown future state. Channel keys are open: the catalog (GET /channels) is live, and a channel deployed later gets its own send method.`;

export const PUBLIC_TAG_DESCRIPTIONS: Record<string, string> = {
  account: 'The API key and its organization.',
  locations: 'Points where reviews are collected.',
  contacts: 'Customers handed over from the CRM.',
  flows: 'Cascade scenarios: steps of channel + delay.',
  cascades: 'Recipients put into a flow.',
  channels: 'The channel catalog and one send method per channel.',
  'review-requests': 'Personal review links delivered by the caller.',
  ratings: 'The ratings feed: every rating in the order it was recorded, to catch up on missed webhooks.',
  webhooks: 'Endpoints that receive signed events, and the events they receive (the `webhooks` of this document).',
};

/** The public API `/api/v1`: integrators' API keys, every POST idempotent, the public error catalog. */
export function publicApi(deps: { routes: readonly RouteSource[]; authenticate: Authenticator; rateLimiter: RateLimiter; failures?: FailureLimiter; publicBaseUrl: string }): HttpApi {
  return {
    basePath: '/api/v1',
    routes: deps.routes,
    gates: { apiKey: apiKeyGate(deps) },
    idempotencyKeys: true,
    document: {
      title: 'Review-Request API',
      version: '1.0.0',
      description: PUBLIC_API_DESCRIPTION,
      serverUrl: serverUrlFor(deps.publicBaseUrl, '/api/v1'),
      tags: PUBLIC_TAG_DESCRIPTIONS,
      errorCatalog: ERROR_CODES,
      webhooks: PUBLIC_WEBHOOKS,
    },
  };
}
