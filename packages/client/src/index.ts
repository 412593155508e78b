/**
 * @rrs/client: a typed client of the review-request service's public API for integrators (a CRM).
 * Its types are generated from the served OpenAPI document (src/generated/api.ts).
 */
export { createReviewRequestClient, API_BASE_PATH, type ClientOptions, type ReviewRequestClient } from './client';
export { retryingFetch, retryAfterMs, isSafeToRepeat, RETRYABLE_STATUSES, RETRYABLE_WHEN_SAFE_STATUSES, type RetryPolicy } from './retry';
export {
  Pages, ReviewRequestApiError,
  type CallOptions, type Cascade, type CascadeListQuery, type CascadePage, type CascadesResource, type CreateReviewRequestBody, type Rating, type RatingFeedQuery, type RatingPage,
  type RatingsResource, type Resources, type ReviewRequest, type ReviewRequestsResource, type StartCascadeBody, type StartedCascade,
} from './resources';
export { idempotencyKeys, IDEMPOTENCY_KEY_HEADER } from './idempotency';
export { verifyWebhook, WebhookVerificationError, type WebhookEvent, type WebhookHeaders } from './webhooks';
export type { paths, components, operations, webhooks } from './generated/api';

import type { components } from './generated/api';
/** The named schemas of the document: `Schemas['CascadeStatus']`, `Schemas['Problem']`, … */
export type Schemas = components['schemas'];
