import { z } from 'zod';
import { MAX_RATING_FEED_PAGE, type schedulerV1 } from '@rrs/proto';
import { defineRoute, type Route } from '../http/route';
import type { PublicRouteDeps } from './deps';
import { RatingSource } from './enums';
import { cursorParameter, encodeCursor, EXAMPLE_IDS, isoOrNull, orNull } from './shapes';

const PublicLinkShown = z.object({ provider: z.string(), url: z.string() });

const RatingJson = z
  .object({
    reviewRequestId: z.string(),
    source: RatingSource,
    cascadeId: z.string().nullable().meta({ description: 'null for a review request made by POST /review-requests.' }),
    cascadeExternalId: z.string().nullable().meta({ description: "The cascade's `externalId`." }),
    recipientId: z.string().nullable(),
    contactExternalId: z.string().nullable().meta({ description: "The contact's externalId, for a recipient that came from POST /contacts." }),
    locationId: z.string(),
    name: z.string().nullable().meta({ description: "The recipient's name, or the review request's `customerName`." }),
    email: z.string().nullable(),
    phone: z.string().nullable().meta({ description: 'E.164.' }),
    rating: z.number().int().min(1).max(5),
    feedback: z.string().nullable().meta({ description: 'The private text left after a low rating, or null.' }),
    ratedAt: z.string(),
    feedbackAt: z.string().nullable(),
    publicLinksShown: z.array(PublicLinkShown).meta({ description: 'The public review links the thank-you page showed with the rating (every rater sees them).' }),
    late: z.boolean().meta({ description: 'Rated after its recipient had finished (the response window closed, the cascade was canceled): reported by `cascade.recipient.rated`.' }),
  })
  .meta({ id: 'Rating', description: 'A rating as the rating events carry it, with the public links its thank-you page showed.' });

const EXAMPLE_RATING = {
  reviewRequestId: EXAMPLE_IDS.reviewRequest,
  source: 'cascade',
  cascadeId: EXAMPLE_IDS.cascade,
  cascadeExternalId: 'order-1042',
  recipientId: EXAMPLE_IDS.recipient,
  contactExternalId: 'crm-1042',
  locationId: EXAMPLE_IDS.location,
  name: 'Anna',
  email: 'anna@example.com',
  phone: '+79161234567',
  rating: 2,
  feedback: 'The coffee was cold',
  ratedAt: '2026-05-01T12:30:00.000Z',
  feedbackAt: '2026-05-01T12:31:10.000Z',
  publicLinksShown: [{ provider: 'google', url: 'https://search.google.com/local/writereview?placeid=ChIJN1t_tDeuEmsRUsoyG83frY4' }],
  late: false,
};

function ratingJson(item: schedulerV1.RatingFeedItem) {
  const cascade = item.cascadeId !== '';
  return {
    reviewRequestId: item.reviewRequestId,
    source: (cascade ? 'cascade' : 'review_request') as z.infer<typeof RatingSource>,
    cascadeId: orNull(item.cascadeId),
    cascadeExternalId: item.hasCascadeExternalId ? item.cascadeExternalId : null,
    recipientId: orNull(item.recipientId),
    contactExternalId: orNull(item.contactExternalId),
    locationId: item.locationId,
    name: orNull(item.name),
    email: orNull(item.email),
    phone: orNull(item.phone),
    rating: item.rating,
    feedback: orNull(item.feedback),
    ratedAt: item.ratedAt!.toISOString(),
    feedbackAt: isoOrNull(item.feedbackAt),
    publicLinksShown: item.publicLinksShown.map((link) => ({ provider: link.provider, url: link.url })),
    late: item.late,
  };
}

/** GET /api/v1/ratings: the ratings feed, for a receiver that missed webhooks (docs/api-conventions.md, "The ratings feed"). */
export function ratingRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/ratings',
      operationId: 'listRatings',
      summary: 'The ratings feed',
      description:
        'Every rating of the organization — cascade recipients\' and review requests\', late ones included — in the order it was recorded, from `since` on. ' +
        'Keep the `nextCursor` of each page (it is there on the last page too) and pass it as `since` next time: a receiver that was down resumes from its last cursor and misses nothing, and gets nothing twice. ' +
        'A rating whose private feedback came after it was recorded moves to the end of the feed then, with the feedback: it comes once more, complete.',
      tags: ['ratings'],
      auth: 'apiKey',
      scope: 'cascades:read',
      rateLimited: true,
      request: {
        query: z.object({
          since: cursorParameter('ratings', 'A `nextCursor` of this feed; without it, the feed from its start.', encodeCursor('ratings', '0')),
          limit: z.coerce.number().int().min(1).max(MAX_RATING_FEED_PAGE).optional().meta({ description: `Page size, 1 to ${MAX_RATING_FEED_PAGE} (default 100).` }),
        }),
      },
      responses: {
        200: {
          description: 'The ratings recorded after `since`, oldest first.',
          body: z.object({
            ratings: z.array(RatingJson),
            nextCursor: z.string().meta({ description: 'Where the next page starts: pass it as `since`. Present on every page, also the last and an empty one.' }),
            hasMore: z.boolean().meta({ description: 'More ratings follow right now: ask again at once with `nextCursor`; false once you are up to date.' }),
          }),
          example: { ratings: [EXAMPLE_RATING], nextCursor: encodeCursor('ratings', '42'), hasMore: false },
        },
      },
      example: { query: { since: encodeCursor('ratings', '41'), limit: '100' } },
      handler: async ({ query, principal, metadata }) => {
        const after = Number(query.since ?? '0');
        const r = await clients.scheduler.listRatingFeed({ organizationId: principal.organization.id, after, limit: query.limit ?? 0 }, { metadata });
        return { body: { ratings: r.ratings.map(ratingJson), nextCursor: encodeCursor('ratings', String(r.last)), hasMore: r.hasMore } };
      },
    }),
  ];
}
