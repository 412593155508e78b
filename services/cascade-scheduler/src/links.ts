/** Review link tokens are 22 base62 characters (ids.ts tokenBatch: the minute, then 107 random bits); anything else is not looked up. */
export const TOKEN_PATTERN = /^[0-9A-Za-z]{22}$/;

/** The public page of a review link: `/r/<token>` (the review form) or `/u/<token>` (unsubscribe). */
export function tokenUrl(publicBaseUrl: string, page: 'r' | 'u', token: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}/${page}/${token}`;
}

/** A review link with everything its form shows. */
export interface ReviewLink {
  id: string;
  organization_id: string;
  token: string;
  status: string;
  recipient_id: string | null;
  opened_at: Date | null;
  location_id: string;
  customer_name: string;
  contact: string;
  rated_at: Date | null;
  location_name: string | null;
  review_links: Array<{ provider: string; url: string }> | null;
  locale: string | null;
  organization_name: string | null;
  low_rating_threshold: number | null;
  rating: number | null;
  feedback: string | null;
  email: string | null;
  /** The recipient's phone (E.164), for cascade links. */
  phone: string | null;
  unsubscribed: boolean;
  /** When the request was canceled (its cascade, or the review request itself); null while active. */
  canceled_at: Date | null;
  /** The last message sent to the link's recipient, or when the link was made: what its lifetime counts from. */
  last_message_at: Date;
  db_now: Date;
}
