import type { RequestHandler } from 'express';
import type { Logger } from '@rrs/runtime';
import type { FailureLimiter } from '../addressLimits';
import { adminTokenGate, AUTH_DESCRIPTIONS } from '../http/auth';
import type { HttpApi } from '../http/api';
import { ERROR_CODES, KERNEL_CODES, type ErrorCodeInfo } from '../http/errorCodes';
import { notFound } from '../http/errors';
import type { GatewayClients } from '../clients';
import { connectorRoutes } from './connectorRoutes';
import { memberRoutes } from './memberRoutes';
import { busSystemEmails, type SystemEmails } from '../account/systemEmails';
import { lifecycleRoutes } from './lifecycleRoutes';
import { peopleRoutes } from './peopleRoutes';
import { adminErasureRoutes } from './erasureRoutes';
import { adminRoutes } from './routes';
import { deliverabilityRoute, type DeliverabilityDeps } from './deliverabilityRoutes';
import { txtLookup } from '../useCases/deliverability';

const TAGS = ['organizations', 'api-keys', 'locations', 'flows', 'templates', 'channels', 'sms-balance', 'people', 'connectors', 'members'];

/** What a request to the admin API may get: the kernel's codes and the admin token's. */
const ADMIN_ERROR_CATALOG: Record<string, ErrorCodeInfo> = {
  ...Object.fromEntries(KERNEL_CODES.map((code) => [code, ERROR_CODES[code]])),
  ...AUTH_DESCRIPTIONS.adminToken.codes,
};

/**
 * The account admin API (`/admin/v1`): what the account's web UI calls. Authorized by ADMIN_TOKEN as a
 * bearer token. Its OpenAPI document (`/admin/v1/openapi.json`) needs no token, like the public API's.
 * No Idempotency-Key: the operations are the operator's, not an integrator's retries.
 */
export function adminApi(
  clients: GatewayClients,
  access: { tokens: readonly string[]; failures: FailureLimiter; logger: Logger; publicBaseUrl: string; systemEmails?: SystemEmails; deliverability?: DeliverabilityDeps },
): HttpApi {
  return {
    basePath: '/admin/v1',
    routes: [
      ...adminRoutes(clients),
      ...peopleRoutes(clients),
      ...adminErasureRoutes(clients),
      ...lifecycleRoutes(clients),
      ...connectorRoutes(clients),
      ...memberRoutes(clients, access.publicBaseUrl, access.systemEmails ?? busSystemEmails(undefined, access.publicBaseUrl, access.logger)),
      deliverabilityRoute(access.deliverability ?? { lookup: txtLookup() }, 'adminToken', '/deliverability'),
    ],
    gates: { adminToken: adminTokenGate(access.tokens, access.failures, access.logger) },
    idempotencyKeys: false,
    document: {
      title: 'Review-Request account admin API',
      version: '1.0.0',
      description:
        "What the account's web UI calls: organizations, API keys, locations, flows, message templates, channel configuration, the SMS balance, the opt-out ledger and per-person export, and the CRM connectors. Authorized by the ADMIN_TOKEN as a bearer token. Errors are RFC 9457 `application/problem+json` with a stable `code`, like the public API.",
      serverUrl: '/admin/v1',
      tags: Object.fromEntries(TAGS.map((tag) => [tag, `Account ${tag}.`])),
      errorCatalog: ADMIN_ERROR_CATALOG,
    },
  };
}

/** Without ADMIN_TOKEN the admin API does not exist: every path below it, its document included, is 404. */
export const adminApiDisabled: RequestHandler = (_req, _res, next) => next(notFound('the admin API is disabled: ADMIN_TOKEN is not set'));
