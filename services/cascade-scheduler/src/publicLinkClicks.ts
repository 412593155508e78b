import { isPublicReviewUrl, type schedulerV1 } from '@rrs/proto';
import { NotFoundError, type Pool } from '@rrs/runtime';
import { markStaleOf } from './overviewRollup';
import { loadReviewLink } from './reviewForm';

/**
 * A click on the public review link at `index` of a rated review link's thank-you page: recorded once
 * per review request and site (the link's provider), answered with the site's URL for the redirect.
 * The links are shown only after a rating, so an unrated link has none to click: not found, like an
 * unknown index or a link that is not a web address; an expired link is `link_expired`. Nothing is
 * recorded for any of them.
 */
export async function recordPublicLinkClick(pool: Pool, input: schedulerV1.RecordPublicLinkClickRequest): Promise<schedulerV1.RecordPublicLinkClickResponse> {
  const link = await loadReviewLink(pool, input.token);
  const target = link.rating === null || !Number.isInteger(input.index) || input.index < 0 ? undefined : (link.review_links ?? [])[input.index];
  if (!target || !isPublicReviewUrl(target.url)) throw new NotFoundError('public review link');
  // With the overview's stale mark of an old request (overviewRollup.ts), in the same statement.
  const { rows } = await pool.query<{ recorded: number }>(
    `WITH changed AS (INSERT INTO public_link_clicks (review_request_id, organization_id, provider, url) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING review_request_id AS id),
          marked AS (${markStaleOf('changed')})
     SELECT count(*)::int AS recorded FROM changed`,
    [link.id, link.organization_id, target.provider.toLowerCase(), target.url],
  );
  return { url: target.url, recorded: rows[0].recorded === 1 };
}
