/**
 * @rrs/client: a typed client of the review-request service's public API for integrators (a CRM).
 * Its types are generated from the served OpenAPI document (src/generated/api.ts).
 */
export { createReviewRequestClient, API_BASE_PATH, type ClientOptions, type ReviewRequestClient } from './client';
export { retryingFetch, retryAfterMs, RETRYABLE_STATUSES, type RetryPolicy } from './retry';
export { idempotencyKeys, IDEMPOTENCY_KEY_HEADER } from './idempotency';
export { verifyWebhook, WebhookVerificationError, type WebhookEvent, type WebhookHeaders } from './webhooks';
export type { paths, components, operations, webhooks } from './generated/api';

import type { components } from './generated/api';
/** The named schemas of the document: `Schemas['CascadeStatus']`, `Schemas['Problem']`, … */
export type Schemas = components['schemas'];
