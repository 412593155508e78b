import express, { type Request, type Response, type Router } from 'express';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { collapseRepeats, DomainError, httpStatusOf, type Logger, type PromiseClient } from '@rrs/runtime';
import { LINK_INACTIVE_CODE, type schedulerV1 } from '@rrs/proto';
import { localeOf, TEXT } from './i18n';
import { keepTryingPage, messagePage, RETRY_SCRIPT_CSP_SOURCE, reviewPage, savedLaterPage, unsubscribePage } from './pages';
import type { BotLinkSource } from './botLinks';
import type { RatingOutbox } from './ratingOutbox';
import type { FailureLimiter } from '../addressLimits';

export interface ReviewFormOptions {
  scheduler: PromiseClient<schedulerV1.CascadeSchedulerServiceClient>;
  logger: Logger;
  /**
   * Where a rating goes when the scheduler cannot take it (the RATINGS stream, see ratingOutbox.ts);
   * unset, such a rating gets the keep-trying page at once.
   */
  ratings?: RatingOutbox;
  /** The keep-trying page's wait before its first re-send, doubling per attempt up to `max` (seconds). Default 5 and 60. */
  retrySeconds?: { first: number; max: number };
  /**
   * Unknown and malformed tokens counted per client address (shared by the replicas through Redis):
   * past the limit every link page from that address is the too-many page (429) for a while, so random
   * tokens cannot be tried in bulk. Unset = not counted.
   */
  failures?: FailureLimiter;
  /** The official bots the thank-you page offers (botLinks.ts); unset = none. */
  botLinks?: BotLinkSource;
  /** Submits allowed per token and client IP per window. */
  submitsPerWindow?: number;
  windowSeconds?: number;
}

const CSRF_COOKIE = 'rrs_form_csrf';
const TOKEN = /^[0-9A-Za-z]{22}$/;

function securityHeaders(res: Response, scriptSource?: string): void {
  // The token is in the URL: it must not leak through Referer, caches or frames. Scripts only by hash, where a page has one.
  const scripts = scriptSource ? `; script-src ${scriptSource}` : '';
  res.setHeader('Content-Security-Policy', `default-src 'none'; style-src 'unsafe-inline'${scripts}; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`);
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Cache-Control', 'no-store');
}

function readCookie(req: Request, name: string): string | undefined {
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return undefined;
}

/**
 * Double-submit CSRF token: a random value in a SameSite=Strict, HttpOnly cookie scoped to the link's
 * path and the same value in the form. A cross-site POST carries neither the cookie nor the value.
 */
function issueCsrf(req: Request, res: Response, path: string): string {
  const existing = readCookie(req, CSRF_COOKIE);
  if (existing && /^[0-9a-f]{32}$/.test(existing)) return existing;
  const value = randomBytes(16).toString('hex');
  const secure = req.protocol === 'https' ? '; Secure' : '';
  res.append('Set-Cookie', `${CSRF_COOKIE}=${value}; Path=${path}; HttpOnly; SameSite=Strict; Max-Age=86400${secure}`);
  return value;
}

function csrfOk(req: Request): boolean {
  const cookie = readCookie(req, CSRF_COOKIE);
  const field = typeof req.body?.csrf === 'string' ? req.body.csrf : '';
  if (!cookie || cookie.length !== field.length || cookie.length === 0) return false;
  if (!timingSafeEqual(Buffer.from(cookie), Buffer.from(field))) return false;
  // Browsers send Origin on POST: when present it must be this host.
  const origin = req.get('origin');
  if (origin && origin !== 'null') {
    try {
      if (new URL(origin).host !== req.get('host')) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/**
 * The public review form `/r/<token>` and unsubscribe page `/u/<token>`: no API key, HTML for a phone.
 * Everything it records goes through the scheduler's form RPCs; this router only renders.
 */
export function reviewFormRouter(options: ReviewFormOptions): Router {
  const router = express.Router();
  const limiter = new RateLimiterMemory({ points: options.submitsPerWindow ?? 20, duration: options.windowSeconds ?? 600, keyPrefix: 'form' });
  const views = new RateLimiterMemory({ points: 120, duration: 60, keyPrefix: 'form-view' });
  const urlencoded = express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 10 });

  const retrySeconds = options.retrySeconds ?? { first: 5, max: 60 };
  const failures = options.failures;
  // During an outage every submit would log the same failure: once per cause per interval, with a count.
  const outageLog = collapseRepeats(options.logger);

  const send = (res: Response, status: number, html: string, scriptSource?: string) => {
    securityHeaders(res, scriptSource);
    res.status(status).type('text/html; charset=utf-8').send(html);
  };

  /** Per token and client IP: one abusive client cannot flood a link, nor one link be hammered from one place. */
  async function allowed(limiterOf: RateLimiterMemory, req: Request, res: Response, token: string): Promise<boolean> {
    try {
      await limiterOf.consume(`${token}|${req.ip}`);
      return true;
    } catch {
      res.setHeader('Retry-After', '60');
      send(res, 429, messagePage('tooMany'));
      return false;
    }
  }

  function fail(res: Response, err: unknown, locale?: 'ru' | 'en'): void {
    // Past its lifetime (LINK_LIFETIME_DAYS of @rrs/proto, applied by the scheduler): 410, in the form's language.
    if (err instanceof DomainError && err.code === 'link_expired') return send(res, 410, messagePage('expired', localeOf(String(err.details?.locale ?? ''))));
    // Its request was canceled (the order refunded): a polite page, 410, and no rating is taken.
    if (err instanceof DomainError && err.code === LINK_INACTIVE_CODE) return send(res, 410, messagePage('inactive', localeOf(String(err.details?.locale ?? ''))));
    if (err instanceof DomainError && err.kind === 'not_found') return send(res, 404, messagePage('notFound'));
    if (isOutage(err)) {
      // An outage is not our fault and passes: 503 with Retry-After; a page that was a GET reloads itself.
      outageLog.warn({ err }, 'review form: the scheduler is unavailable');
      res.setHeader('Retry-After', String(retrySeconds.first));
      return send(res, 503, messagePage('unavailable', locale, res.req.method === 'GET' ? retrySeconds.first : undefined));
    }
    options.logger.error({ err }, 'review form failed');
    const status = httpStatusOf(err);
    send(res, status < 500 ? status : 500, messagePage('error', locale));
  }

  const base = (token: string) => `/r/${token}`;

  /**
   * A page of one link: a token that cannot be one is the not-found page; then the link's rate limit
   * (views for GETs, submits for POSTs) and, for a POST, the CSRF check, before the scheduler is asked.
   */
  const linkPage =
    (route: string, handle: (token: string, req: Request, res: Response) => Promise<void>, options: { oneClick?: boolean } = {}) =>
    async (req: Request, res: Response): Promise<void> => {
      res.locals.route = route;
      const token = String(req.params.token);
      const address = req.ip ?? 'unknown';
      const blockedFor = (await failures?.blockedFor(address)) ?? 0;
      if (blockedFor > 0) return tooManyUnknown(res, blockedFor);
      if (!TOKEN.test(token)) return unknownLink(res, address);
      const submits = req.method === 'POST';
      if (!(await allowed(submits ? limiter : views, req, res, token))) return;
      // RFC 8058: the mail client's one-click POST carries no cookie by design; the link's secret token
      // is its authority, and unsubscribing is all it can do.
      const exempt = options.oneClick === true && isOneClick(req);
      if (submits && !exempt && !csrfOk(req)) return send(res, 403, messagePage('csrf'));
      try {
        await handle(token, req, res);
      } catch (err) {
        if (err instanceof DomainError && err.kind === 'not_found' && err.code !== 'link_expired' && err.code !== LINK_INACTIVE_CODE) return unknownLink(res, address);
        fail(res, err);
      }
    };

  /** A token that is no link: the not-found page, counted against the address (the too-many page once over the limit). */
  async function unknownLink(res: Response, address: string): Promise<void> {
    const nowBlocked = (await failures?.fail(address)) ?? 0;
    if (nowBlocked > 0) return tooManyUnknown(res, nowBlocked);
    send(res, 404, messagePage('notFound'));
  }

  function tooManyUnknown(res: Response, seconds: number): void {
    res.setHeader('Retry-After', String(seconds));
    send(res, 429, messagePage('tooMany'));
  }

  router.get(
    '/r/:token',
    linkPage('/r/:token', async (token, req, res) => {
      // A rated form gets a link code for each bot offered (the scheduler issues them; none before a rating).
      const bots = options.botLinks?.() ?? new Map<string, string>();
      const { form } = await options.scheduler.getReviewForm({ token, recordOpen: true, forUnsubscribe: false, botChannels: [...bots.keys()] });
      send(res, 200, reviewPage(form!, issueCsrf(req, res, base(token)), base(token), undefined, bots));
    }),
  );

  router.post(
    '/r/:token/rating',
    urlencoded,
    linkPage('/r/:token/rating', async (token, req, res) => {
      const rating = Number(req.body?.rating);
      if (!Number.isInteger(rating) || rating < 1 || rating > 5) {
        const { form } = await options.scheduler.getReviewForm({ token, recordOpen: false, forUnsubscribe: false, botChannels: [] });
        return send(res, 400, reviewPage(form!, issueCsrf(req, res, base(token)), base(token), TEXT[localeOf(form!.locale)].pickOne));
      }
      try {
        await options.scheduler.submitRating({ token, rating });
      } catch (err) {
        if (!isOutage(err)) throw err;
        return acceptLater(token, rating, req, res, err);
      }
      res.redirect(303, base(token));
    }),
  );

  /**
   * The scheduler cannot record the rating now (it is down, or its database). The rating goes to the
   * RATINGS stream and the customer gets the thank-you; if the bus cannot take it either, the
   * keep-trying page (503, Retry-After) sends the same form again by itself until it is recorded.
   */
  async function acceptLater(token: string, rating: number, req: Request, res: Response, cause: unknown): Promise<void> {
    const locale = localeOf(typeof req.body?.lang === 'string' ? req.body.lang : undefined);
    if (options.ratings) {
      try {
        await options.ratings.accept(token, rating);
        outageLog.warn({ err: cause }, 'the scheduler cannot record ratings: accepted on the RATINGS stream');
        return send(res, 200, savedLaterPage(locale, rating));
      } catch (err) {
        outageLog.error({ err, scheduler: (cause as Error).message }, 'neither the scheduler nor the bus can take ratings: the page keeps trying');
      }
    }
    const attempt = Math.min(Math.max(0, Math.trunc(Number(req.body?.attempt)) || 0), 100);
    const wait = Math.min(retrySeconds.max, retrySeconds.first * 2 ** Math.min(attempt, 10));
    res.setHeader('Retry-After', String(wait));
    send(res, 503, keepTryingPage(locale, base(token), { csrf: String(req.body.csrf), rating, attempt: attempt + 1 }, wait), RETRY_SCRIPT_CSP_SOURCE);
  }

  /**
   * A public review link of the thank-you page, by its position in the form's links: the click is
   * recorded (once per review request and site) and the customer redirected to the site. The page's
   * `Referrer-Policy: no-referrer` also covers the redirect, so the site never sees the token.
   */
  router.get(
    '/r/:token/go/:index',
    linkPage('/r/:token/go/:index', async (token, req, res) => {
      const index = /^\d{1,3}$/.test(String(req.params.index)) ? Number(req.params.index) : -1;
      if (index < 0) return send(res, 404, messagePage('notFound'));
      const { url } = await options.scheduler.recordPublicLinkClick({ token, index });
      securityHeaders(res);
      res.redirect(302, url);
    }),
  );

  router.post(
    '/r/:token/feedback',
    urlencoded,
    linkPage('/r/:token/feedback', async (token, req, res) => {
      const text = typeof req.body?.text === 'string' ? req.body.text : '';
      try {
        await options.scheduler.submitFeedback({ token, text });
      } catch (err) {
        // Feedback before a rating, or feedback the scheduler refuses: back to the form, which shows the state.
        if (!(err instanceof DomainError && (err.code === 'not_rated' || err.kind === 'invalid'))) throw err;
      }
      res.redirect(303, base(token));
    }),
  );

  router.get(
    '/u/:token',
    linkPage('/u/:token', async (token, req, res) => {
      const { form } = await options.scheduler.getReviewForm({ token, recordOpen: false, forUnsubscribe: true, botChannels: [] });
      // Only cascade links (which carry the recipient's email) have an unsubscribe page.
      if (!form!.email) return send(res, 404, messagePage('notFound'));
      // A GET only shows the button: mail scanners follow links and must not unsubscribe anyone.
      send(res, 200, unsubscribePage(form!, issueCsrf(req, res, `/u/${token}`), `/u/${token}`));
    }),
  );

  router.post(
    '/u/:token',
    urlencoded,
    multipartForm,
    linkPage(
      '/u/:token',
      async (token, req, res) => {
        const { form } = await options.scheduler.unsubscribe({ token, oneClick: isOneClick(req) });
        send(res, 200, unsubscribePage(form!, '', `/u/${token}`));
      },
      { oneClick: true },
    ),
  );

  return router;
}

/** The body of an RFC 8058 one-click unsubscribe: `List-Unsubscribe=One-Click`. */
function isOneClick(req: Request): boolean {
  return req.body?.['List-Unsubscribe'] === 'One-Click';
}

const rawMultipart = express.raw({ type: 'multipart/form-data', limit: '16kb' });

/**
 * RFC 8058 lets the mail client send its one-click body as multipart/form-data: parsed by the runtime's
 * own Fetch implementation, into the same `req.body` an urlencoded form gives. A malformed body is empty.
 */
function multipartForm(req: Request, res: Response, next: (err?: unknown) => void): void {
  if (!req.is('multipart/form-data')) return next();
  rawMultipart(req, res, (err?: unknown) => {
    if (err) return next(err);
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    new globalThis.Response(body, { headers: { 'content-type': req.get('content-type') ?? '' } })
      .formData()
      .then((form) => {
        req.body = Object.fromEntries([...form.entries()].filter(([, value]) => typeof value === 'string'));
      })
      .catch(() => {
        req.body = {};
      })
      .finally(() => next());
  });
}

/** An outage of what records the form's answers (the scheduler, or its database): it passes, so the form says "later", never 500. */
function isOutage(err: unknown): boolean {
  return err instanceof DomainError && err.kind === 'unavailable';
}
