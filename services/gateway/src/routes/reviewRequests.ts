import { z } from 'zod';
import { defineRoute, type Route } from '../http/route';
import type { PublicRouteDeps } from './deps';
import { ReviewRequestStatus } from './enums';
import { EXAMPLE_IDS } from './shapes';

const CreateReviewRequestBody = z.strictObject({
  locationId: z.string().min(1).max(64).meta({ description: 'An id from GET /locations; an unknown one is 404.' }),
  customerName: z.string().max(200).optional(),
  contact: z.string().max(254).optional().meta({ description: "An email or a phone, kept for your reporting only (nothing is sent to it)." }),
});
const ReviewRequestJson = z.object({
  id: z.string(),
  token: z.string(),
  url: z.string().meta({ description: 'The personal link, `<base>/r/<token>`.' }),
  status: ReviewRequestStatus,
});

/** POST /api/v1/review-requests: a personal review link the caller delivers by its own means. */
export function reviewRequestRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/review-requests',
      operationId: 'createReviewRequest',
      summary: 'Create a personal review link',
      description: 'The link opens the same review form as a cascade message, with the same low-rating interception.',
      tags: ['review-requests'],
      auth: 'apiKey',
      scope: 'review-requests:write',
      rateLimited: true,
      // A review request is one recipient of its own: its link and the form's low-rating interception.
      recipients: () => 1,
      request: { body: CreateReviewRequestBody },
      responses: {
        201: {
          description: 'The review request.',
          body: ReviewRequestJson,
          example: { id: EXAMPLE_IDS.reviewRequest, token: 'q7Xk2mN9pR4tV8wZ', url: 'https://reviews.example.com/r/q7Xk2mN9pR4tV8wZ', status: 'created' },
        },
      },
      errors: [404],
      example: { body: { locationId: EXAMPLE_IDS.location, customerName: 'Anna', contact: 'anna@example.com' } },
      handler: async ({ body, principal, metadata }) => {
        const r = await clients.scheduler.createReviewRequest(
          { organizationId: principal.organization.id, locationId: body.locationId, customerName: body.customerName ?? '', contact: body.contact ?? '' },
          { metadata },
        );
        const rr = r.reviewRequest!;
        return { body: { id: rr.id, token: rr.token, url: rr.url, status: rr.status }, replayed: r.idempotentReplayed, recipientBudget: r.recipientBudget };
      },
    }),
  ];
}

/** POST /api/v1/review-requests/{id}/cancel: the link stops taking ratings (docs/api-conventions.md, "Canceling"). */
export function reviewRequestCancelRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/review-requests/{id}/cancel',
      operationId: 'cancelReviewRequest',
      summary: 'Cancel a review request',
      description:
        'Closes the personal link of a review request (an order refunded): from now on it shows a polite "this request is no longer active" page and accepts no rating; its `status` becomes `canceled`. ' +
        'A link already rated keeps its rating and is answered as it is. Idempotent: canceling again changes nothing and answers the same. The links of cascade recipients are closed by canceling their cascade (POST /cascades/{id}/cancel).',
      tags: ['review-requests'],
      auth: 'apiKey',
      scope: 'review-requests:write',
      rateLimited: true,
      request: { params: z.object({ id: z.string().max(64) }) },
      responses: {
        200: {
          description: 'The review request.',
          body: ReviewRequestJson,
          example: { id: EXAMPLE_IDS.reviewRequest, token: 'q7Xk2mN9pR4tV8wZ', url: 'https://reviews.example.com/r/q7Xk2mN9pR4tV8wZ', status: 'canceled' },
        },
      },
      example: { params: { id: EXAMPLE_IDS.reviewRequest } },
      handler: async ({ params, principal, metadata }) => {
        const r = await clients.scheduler.cancelReviewRequest({ organizationId: principal.organization.id, id: params.id }, { metadata });
        const rr = r.reviewRequest!;
        return { body: { id: rr.id, token: rr.token, url: rr.url, status: rr.status }, replayed: r.idempotentReplayed };
      },
    }),
  ];
}
