/** Review link tokens are 22 base62 characters (130 bits); anything else is not looked up. */
export const TOKEN_PATTERN = /^[0-9A-Za-z]{22}$/;

/** The public page of a review link: `/r/<token>` (the review form) or `/u/<token>` (unsubscribe). */
export function tokenUrl(publicBaseUrl: string, page: 'r' | 'u', token: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}/${page}/${token}`;
}
