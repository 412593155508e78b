import { createHash } from 'node:crypto';
import { botDeepLink, isPublicReviewUrl, type schedulerV1 } from '@rrs/proto';
import { TEXT, type Locale } from './i18n';

/** HTML-escapes text for element content and quoted attribute values. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

const STYLE = `
*{box-sizing:border-box}body{margin:0;font:16px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f5f5f7;color:#1d1d1f}
main{max-width:28rem;margin:0 auto;padding:1.5rem 1rem}h1{font-size:1.35rem;margin:.2rem 0 1rem}.card{background:#fff;border-radius:14px;padding:1.25rem;box-shadow:0 1px 3px rgba(0,0,0,.08)}
.place{color:#6e6e73;font-size:.95rem;margin:0}.stars{display:flex;flex-direction:row-reverse;justify-content:center;gap:.25rem;margin:1.25rem 0}
.stars input{position:absolute;opacity:0;width:1px;height:1px}.stars label{font-size:2.6rem;line-height:1;color:#c7c7cc;cursor:pointer;padding:.1rem}
.stars input:checked~label,.stars label:hover,.stars label:hover~label{color:#ffb400}.stars input:focus-visible+label{outline:2px solid #0071e3;border-radius:6px}
button{width:100%;min-height:3rem;border:0;border-radius:10px;background:#0071e3;color:#fff;font-size:1.05rem;font-weight:600}
textarea{width:100%;min-height:7rem;font:inherit;padding:.6rem;border:1px solid #d2d2d7;border-radius:10px;margin:.5rem 0 .8rem}
.links{list-style:none;padding:0;margin:.6rem 0 0}.links a{display:block;text-align:center;padding:.8rem;margin:.4rem 0;border:1px solid #0071e3;border-radius:10px;color:#0071e3;text-decoration:none;font-weight:600}
.error{color:#c00;margin:.5rem 0}.sep{margin:1.2rem 0;border:0;border-top:1px solid #e5e5ea}`;

export function page(locale: Locale, title: string, body: string, head = ''): string {
  return `<!doctype html><html lang="${locale}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex">${head}<title>${esc(title)}</title><style>${STYLE}</style></head><body><main>${body}</main></body></html>`;
}

const PROVIDERS: Record<string, string> = { google: 'Google', yandex: 'Яндекс', '2gis': '2GIS', tripadvisor: 'Tripadvisor' };

/** The links go through `<action>/go/<index>` (the index in the form's links), which records the click and redirects to the site. */
function publicLinks(form: schedulerV1.ReviewForm, t: (typeof TEXT)[Locale], action: string): string {
  const links = form.reviewLinks.map((link, index) => ({ ...link, index })).filter((l) => isPublicReviewUrl(l.url));
  if (!links.length) return '';
  return `<p>${esc(t.publicPrompt)}</p><ul class="links" data-testid="public-links">${links
    .map((l) => `<li><a href="${esc(`${action}/go/${l.index}`)}" rel="noopener noreferrer" target="_blank">${esc(PROVIDERS[l.provider.toLowerCase()] ?? l.provider)}</a></li>`)
    .join('')}</ul>`;
}

const MESSENGERS: Record<string, string> = { MAX: 'MAX', TELEGRAM: 'Telegram' };

/**
 * "Get future requests in MAX / in Telegram": a deep link to each official bot the form has a code for
 * and the catalog has a bot for (`botBases`: channel → `https://t.me/<bot>`; the all-in-one's stand-in
 * is an http page of its own), in catalog order.
 */
function botOffers(form: schedulerV1.ReviewForm, t: (typeof TEXT)[Locale], botBases: ReadonlyMap<string, string>): string {
  const offers = [...botBases].flatMap(([channel, base]) => {
    const code = form.botLinks.find((link) => link.channel === channel)?.code;
    return code && /^https?:\/\//.test(base) ? [{ channel, url: botDeepLink(base, code) }] : [];
  });
  if (!offers.length) return '';
  return `<hr class="sep"><p id="bot-prompt">${esc(t.botPrompt)}</p><ul class="links" data-testid="bot-links" aria-labelledby="bot-prompt">${offers
    .map((o) => `<li><a href="${esc(o.url)}" rel="noopener noreferrer" target="_blank" data-channel="${esc(o.channel)}">${esc(t.botIn(MESSENGERS[o.channel] ?? o.channel))}</a></li>`)
    .join('')}</ul><p class="place">${esc(t.botNote)}</p>`;
}

/** The form, or — once rated — the thank-you with the public links for every rater and, after a low rating, the private feedback form. */
export function reviewPage(form: schedulerV1.ReviewForm, csrf: string, action: string, error?: string, botBases: ReadonlyMap<string, string> = new Map()): string {
  const locale = form.locale === 'ru' ? 'ru' : 'en';
  const t = TEXT[locale];
  const place = form.locationName || form.organizationName;
  if (form.rating === 0) {
    const stars = [5, 4, 3, 2, 1]
      .map((n) => `<input type="radio" id="star${n}" name="rating" value="${n}" required><label for="star${n}" title="${esc(t.stars(n))}" aria-label="${esc(t.stars(n))}">★</label>`)
      .join('');
    return page(locale, t.title, `<div class="card"><p class="place">${esc(place)}</p><h1>${esc(t.prompt(place))}</h1>
<form method="post" action="${esc(action)}/rating"><input type="hidden" name="csrf" value="${esc(csrf)}"><input type="hidden" name="lang" value="${locale}">
<fieldset class="stars" style="border:0;padding:0">${stars}</fieldset>${error ? `<p class="error" role="alert">${esc(error)}</p>` : ''}
<button type="submit">${esc(t.submit)}</button></form></div>`);
  }
  const low = form.rating <= form.lowRatingThreshold;
  let feedback = '';
  if (low && !form.feedbackGiven) {
    feedback = `<hr class="sep"><form method="post" action="${esc(action)}/feedback"><input type="hidden" name="csrf" value="${esc(csrf)}">
<label for="text">${esc(t.feedbackPrompt)}</label><textarea id="text" name="text" maxlength="2000" required placeholder="${esc(t.feedbackPlaceholder)}"></textarea>
${error ? `<p class="error" role="alert">${esc(error)}</p>` : ''}<button type="submit">${esc(t.feedbackSubmit)}</button></form>`;
  } else if (form.feedbackGiven) {
    feedback = `<hr class="sep"><p data-testid="feedback-thanks">${esc(t.feedbackThanks)}</p>`;
  }
  return page(locale, t.thanks, `<div class="card"><p class="place">${esc(place)}</p><h1>${esc(t.thanks)}</h1><p data-testid="your-rating">${esc(t.yourRating(form.rating))}</p>
${publicLinks(form, t, action)}${feedback}${botOffers(form, t, botBases)}</div>`);
}

/**
 * The address as the unsubscribe page shows it: enough for its owner to recognise it, not enough for
 * whoever holds the link (a forwarded email, a shared screenshot) to learn it: the first character of
 * the local part and of the domain, and the top-level domain (`a•••@e•••.com`).
 */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf('@');
  if (at < 1) return '•••';
  const domain = email.slice(at + 1);
  const dot = domain.lastIndexOf('.');
  const tld = dot > 0 ? domain.slice(dot) : '';
  return `${email[0]}•••@${domain[0] ?? ''}•••${tld}`;
}

export function unsubscribePage(form: schedulerV1.ReviewForm, csrf: string, action: string): string {
  const locale = form.locale === 'ru' ? 'ru' : 'en';
  const t = TEXT[locale];
  const org = form.organizationName || form.locationName;
  if (form.unsubscribed) return page(locale, t.unsubscribeTitle, `<div class="card"><h1>${esc(t.unsubscribeTitle)}</h1><p data-testid="unsubscribed">${esc(t.unsubscribed(org))}</p></div>`);
  return page(locale, t.unsubscribeTitle, `<div class="card"><h1>${esc(t.unsubscribeTitle)}</h1><p>${esc(t.unsubscribePrompt(org, maskEmail(form.email)))}</p>
<form method="post" action="${esc(action)}"><input type="hidden" name="csrf" value="${esc(csrf)}"><button type="submit">${esc(t.unsubscribeButton)}</button></form></div>`);
}

/**
 * A page for a link that cannot be served; both languages, since an unknown link has no organization.
 * With `refreshSeconds` (a GET during an outage) the page reloads itself after that many seconds.
 */
export function messagePage(kind: 'notFound' | 'expired' | 'inactive' | 'csrf' | 'tooMany' | 'error' | 'unavailable', locale?: Locale, refreshSeconds?: number): string {
  const locales: Locale[] = locale ? [locale] : ['ru', 'en'];
  const titles: Partial<Record<typeof kind, string>> = { notFound: TEXT[locales[0]].notFoundTitle, expired: TEXT[locales[0]].expiredTitle, inactive: TEXT[locales[0]].inactiveTitle };
  const title = titles[kind] ?? TEXT[locales[0]].title;
  const body = locales.map((l) => `<p lang="${l}">${esc(TEXT[l][kind])}</p>`).join('');
  const head = refreshSeconds === undefined ? '' : `<meta http-equiv="refresh" content="${refreshSeconds}">`;
  return page(locales[0], title, `<div class="card"><h1>${esc(title)}</h1>${body}</div>`, head);
}

/**
 * The thank-you for a rating the bus accepted while the scheduler could not record it: the scheduler
 * records it shortly. The place, the public links and the feedback form need the scheduler, so they
 * show when the link is opened again.
 */
export function savedLaterPage(locale: Locale, rating: number): string {
  const t = TEXT[locale];
  return page(locale, t.thanks, `<div class="card"><h1>${esc(t.thanks)}</h1><p data-testid="your-rating">${esc(t.yourRating(rating))}</p><p data-testid="saved-later">${esc(t.savedLater)}</p></div>`);
}

/**
 * Re-submits the keep-trying page's form after the delay in its `data-after` attribute. Constant text,
 * so the page's Content-Security-Policy allows exactly this script by its hash and nothing else.
 */
const RETRY_SCRIPT = "(function(){var f=document.getElementById('retry');setTimeout(function(){f.submit()},Number(f.getAttribute('data-after'))*1000)})();";
export const RETRY_SCRIPT_CSP_SOURCE = `'sha256-${createHash('sha256').update(RETRY_SCRIPT).digest('base64')}'`;

/**
 * "We'll keep trying": neither the scheduler nor the bus could take the rating. The page holds the same
 * form (CSRF value, rating, language) with the attempt number, and sends it again by itself after
 * `retryAfterSeconds`; without JavaScript, its button does.
 */
export function keepTryingPage(locale: Locale, action: string, fields: { csrf: string; rating: number; attempt: number }, retryAfterSeconds: number): string {
  const t = TEXT[locale];
  return page(locale, t.keepTryingTitle, `<div class="card"><h1>${esc(t.keepTryingTitle)}</h1><p role="status" data-testid="keep-trying">${esc(t.keepTrying(retryAfterSeconds))}</p>
<p data-testid="your-rating">${esc(t.yourRating(fields.rating))}</p><noscript><p>${esc(t.keepTryingNoScript)}</p></noscript>
<form id="retry" method="post" action="${esc(action)}/rating" data-after="${retryAfterSeconds}"><input type="hidden" name="csrf" value="${esc(fields.csrf)}"><input type="hidden" name="lang" value="${locale}"><input type="hidden" name="rating" value="${fields.rating}"><input type="hidden" name="attempt" value="${fields.attempt}">
<button type="submit">${esc(t.keepTryingButton)}</button></form></div><script>${RETRY_SCRIPT}</script>`);
}
