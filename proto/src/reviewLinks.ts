/*
 * The public write-a-review pages a location links to, built from each platform's own id of the business
 * (docs/console.md, "Locations"). The console builds the link from the id the person pastes; the API
 * stores the URL (`reviewLinks`), so a platform not listed here still works by pasting its URL.
 *
 * - Google: the Place ID opens the review form (`search.google.com/local/writereview?placeid=`), the form
 *   Google's Business Profile "ask for reviews" link and the Places API `writeAReviewUri` lead to.
 * - Yandex Maps: the organization's card, its reviews tab (`yandex.ru/maps/org/<id>/reviews/`), where the
 *   rating that opens the review form is (Yandex Business help, "Reviews").
 * - 2GIS: the firm's card, its reviews tab (`2gis.ru/firm/<id>/tab/reviews`), where "Оцените и оставьте
 *   отзыв" is (2GIS help, "Как оставить отзыв о компании").
 */

export const REVIEW_PLATFORMS = ['google', 'yandex', '2gis'] as const;
export type ReviewPlatform = (typeof REVIEW_PLATFORMS)[number];

/** What each platform's id looks like: Google Place IDs are URL-safe base64-like; Yandex and 2GIS ids are digits. */
const ID_PATTERNS: Record<ReviewPlatform, RegExp> = {
  google: /^[A-Za-z0-9_-]{10,300}$/,
  yandex: /^\d{1,30}$/,
  '2gis': /^\d{1,30}$/,
};

const BUILDERS: Record<ReviewPlatform, (id: string) => string> = {
  google: (id) => `https://search.google.com/local/writereview?placeid=${encodeURIComponent(id)}`,
  yandex: (id) => `https://yandex.ru/maps/org/${id}/reviews/`,
  '2gis': (id) => `https://2gis.ru/firm/${id}/tab/reviews`,
};

export function isReviewPlatformId(platform: ReviewPlatform, id: string): boolean {
  return ID_PATTERNS[platform].test(id.trim());
}

/** The platform's write-a-review link for the business with this id; null when the id is not of that platform's form. */
export function reviewLinkOf(platform: ReviewPlatform, id: string): string | null {
  const trimmed = id.trim();
  return isReviewPlatformId(platform, trimmed) ? BUILDERS[platform](trimmed) : null;
}
