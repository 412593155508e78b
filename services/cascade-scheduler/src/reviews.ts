import { schedulerV1 } from '@rrs/proto';
import { runIdempotent, type IdempotencyRequest } from '@rrs/idempotency';
import { AppError, inTransaction, randomBase62, uuidv7, type Pool, type PoolClient } from '@rrs/runtime';
import { MAX_RECIPIENTS, SnapshotWriter, tokenUrl } from './cascades';
import type { Directory } from './directory';
import { rate, stop, type Timing } from './engine';
import { dbNow, lockRecipients, releaseFinishEvent, saveStates } from './store';

/** Tokens are 22 base62 characters (130 bits); anything else is not looked up. */
export const TOKEN_PATTERN = /^[0-9A-Za-z]{22}$/;
export const MAX_FEEDBACK_LENGTH = 2_000;
export const DEFAULT_LOW_RATING_THRESHOLD = 3;

type ReviewRequestResult = Omit<schedulerV1.CreateReviewRequestResponse, 'idempotentReplayed'>;

const createCodec = {
  encode: (v: ReviewRequestResult) => schedulerV1.CreateReviewRequestResponse.encode({ ...v, idempotentReplayed: false }).finish(),
  decode: (b: Uint8Array): ReviewRequestResult => ({ reviewRequest: schedulerV1.CreateReviewRequestResponse.decode(b).reviewRequest }),
};

interface FormRow {
  id: string;
  organization_id: string;
  token: string;
  status: string;
  recipient_id: string | null;
  opened_at: Date | null;
  location_name: string | null;
  review_links: Array<{ provider: string; url: string }> | null;
  locale: string | null;
  organization_name: string | null;
  low_rating_threshold: number | null;
  rating: number | null;
  feedback: string | null;
  email: string | null;
  unsubscribed: boolean;
}

const FORM_QUERY = `
  SELECT rr.id, rr.organization_id, rr.token, rr.status, rr.recipient_id, rr.opened_at, ls.name AS location_name, ls.review_links,
         os.locale, os.name AS organization_name, os.low_rating_threshold, ra.rating, fb.text AS feedback, r.email,
         (r.email IS NOT NULL AND r.email <> '' AND EXISTS (
            SELECT 1 FROM opt_outs o WHERE o.organization_id = rr.organization_id AND o.channel = 'EMAIL' AND o.address = lower(r.email))) AS unsubscribed
    FROM review_requests rr
    LEFT JOIN location_snapshots ls ON ls.organization_id = rr.organization_id AND ls.location_id = rr.location_id
    LEFT JOIN organization_settings os ON os.organization_id = rr.organization_id
    LEFT JOIN ratings ra ON ra.review_request_id = rr.id
    LEFT JOIN feedback fb ON fb.review_request_id = rr.id
    LEFT JOIN recipients r ON r.id = rr.recipient_id
   WHERE rr.token = $1`;

function toForm(row: FormRow): schedulerV1.ReviewForm {
  return {
    token: row.token,
    locationName: row.location_name ?? '',
    locale: row.locale === 'ru' ? 'ru' : 'en',
    rating: row.rating ?? 0,
    feedbackGiven: row.feedback !== null,
    lowRatingThreshold: row.low_rating_threshold ?? DEFAULT_LOW_RATING_THRESHOLD,
    reviewLinks: row.review_links ?? [],
    organizationName: row.organization_name ?? '',
    unsubscribed: row.unsubscribed,
    email: row.email ?? '',
  };
}

/**
 * Review requests and the public form behind `/r/<token>` and `/u/<token>`. A cascade recipient's link
 * and a link from POST /review-requests are the same kind of row and behave the same way; a rating on
 * a recipient's link also finishes the recipient.
 */
export class Reviews {
  private readonly snapshots = new SnapshotWriter();

  constructor(
    private readonly pool: Pool,
    private readonly directory: Directory,
    private readonly options: { publicBaseUrl: string; minuteMs: number; feedbackWindowMinutes: number },
  ) {}

  async create(
    input: { organizationId: string; locationId: string; customerName: string; contact: string },
    idempotency?: IdempotencyRequest,
  ): Promise<{ result: ReviewRequestResult; replayed: boolean }> {
    if (!input.locationId) throw new AppError(400, 'invalid_request', 'locationId: required', { details: { errors: [{ pointer: '/locationId', detail: 'required' }] } });
    const [profile, location] = await Promise.all([
      this.directory.getSendingProfile(input.organizationId),
      this.directory.getLocation(input.organizationId, input.locationId),
    ]);
    await this.snapshots.write(this.pool, input.organizationId, profile, location);
    return runIdempotent(this.pool, idempotency, createCodec, async (client) => {
      const id = uuidv7();
      const token = randomBase62(22);
      await client.query(
        'INSERT INTO review_requests (id, organization_id, token, location_id, customer_name, contact) VALUES ($1, $2, $3, $4, $5, $6)',
        [id, input.organizationId, token, input.locationId, input.customerName, input.contact],
      );
      return { reviewRequest: { id, token, url: tokenUrl(this.options.publicBaseUrl, 'r', token), status: 'created' } };
    });
  }

  private async load(client: Pool | PoolClient, token: string): Promise<FormRow> {
    if (!TOKEN_PATTERN.test(token)) throw new AppError(404, 'not_found', 'unknown review link');
    const { rows } = await client.query<FormRow>(FORM_QUERY, [token]);
    if (!rows[0]) throw new AppError(404, 'not_found', 'unknown review link');
    return rows[0];
  }

  /** The form's data; with `recordOpen`, the first view is recorded as `opened`. */
  async getForm(token: string, recordOpen: boolean): Promise<schedulerV1.ReviewForm> {
    const row = await this.load(this.pool, token);
    if (recordOpen && row.opened_at === null) {
      await this.pool.query(
        `UPDATE review_requests SET opened_at = coalesce(opened_at, clock_timestamp()), status = CASE WHEN status = 'created' THEN 'opened' ELSE status END WHERE id = $1`,
        [row.id],
      );
    }
    return toForm(row);
  }

  /**
   * Records the first rating of a link once: on the review request and, for a cascade link, on the
   * recipient, whose pending steps are canceled and which finishes `rated`. The public review links are
   * shown to every rater, low or high, and that is recorded. A low rating's finish event waits for the
   * feedback form (or the feedback window) so that it carries the feedback.
   */
  async submitRating(token: string, rating: number): Promise<schedulerV1.SubmitRatingResponse> {
    if (!Number.isInteger(rating) || rating < 1 || rating > 5) {
      throw new AppError(400, 'invalid_request', 'rating: an integer from 1 to 5', { details: { errors: [{ pointer: '/rating', detail: 'an integer from 1 to 5' }] } });
    }
    const first = await this.load(this.pool, token);
    const recorded = await inTransaction(this.pool, async (client) => {
      // The recipient row is the lock of a recipient's state; it is taken before anything else.
      const states = first.recipient_id ? await lockRecipients(client, [first.recipient_id]) : new Map();
      const { rowCount } = await client.query(
        'INSERT INTO ratings (review_request_id, organization_id, rating) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        [first.id, first.organization_id, rating],
      );
      if (!rowCount) return false;
      const now = await dbNow(client);
      await client.query(
        `UPDATE review_requests SET status = 'rated', rated_at = $2, opened_at = coalesce(opened_at, $2), public_links_shown_at = $2 WHERE id = $1`,
        [first.id, now],
      );
      const state = first.recipient_id ? states.get(first.recipient_id) : undefined;
      if (state) {
        const t: Timing = { now, minuteMs: this.options.minuteMs };
        const threshold = first.low_rating_threshold ?? DEFAULT_LOW_RATING_THRESHOLD;
        if (rating <= threshold) state.eventNotBefore = new Date(now.getTime() + this.options.feedbackWindowMinutes * this.options.minuteMs);
        rate(state, rating, t);
        await saveStates(client, [state], now);
      }
      return true;
    });
    const row = await this.load(this.pool, token);
    const form = toForm(row);
    return { form, recorded, feedbackRequested: form.rating > 0 && form.rating <= form.lowRatingThreshold && !form.feedbackGiven };
  }

  /** Private feedback after a low rating; recorded once. */
  async submitFeedback(token: string, text: string): Promise<schedulerV1.SubmitFeedbackResponse> {
    const trimmed = text.trim();
    if (trimmed.length === 0 || trimmed.length > MAX_FEEDBACK_LENGTH) {
      throw new AppError(400, 'invalid_request', `text: 1 to ${MAX_FEEDBACK_LENGTH} characters`, { details: { errors: [{ pointer: '/text', detail: `1 to ${MAX_FEEDBACK_LENGTH} characters` }] } });
    }
    const first = await this.load(this.pool, token);
    if (first.rating === null) throw new AppError(409, 'not_rated', 'rate first; feedback follows a rating');
    const recorded = await inTransaction(this.pool, async (client) => {
      const states = first.recipient_id ? await lockRecipients(client, [first.recipient_id]) : new Map();
      const { rowCount } = await client.query(
        'INSERT INTO feedback (review_request_id, organization_id, text) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        [first.id, first.organization_id, trimmed],
      );
      if (!rowCount) return false;
      const now = await dbNow(client);
      await client.query(`UPDATE review_requests SET status = 'feedback', feedback_at = $2 WHERE id = $1`, [first.id, now]);
      const state = first.recipient_id ? states.get(first.recipient_id) : undefined;
      if (state) {
        state.recipient.feedback = trimmed;
        state.dirty = true;
        await saveStates(client, [state], now);
        await releaseFinishEvent(client, state, now);
      }
      return true;
    });
    return { form: toForm(await this.load(this.pool, token)), recorded };
  }

  /**
   * Opts the recipient's email out of the organization's messages and finishes the recipient
   * `unsubscribed` (its pending steps, in any channel, are canceled). Only cascade links have an
   * unsubscribe page.
   */
  async unsubscribe(token: string): Promise<schedulerV1.UnsubscribeResponse> {
    const first = await this.load(this.pool, token);
    if (!first.recipient_id) throw new AppError(404, 'not_found', 'unknown unsubscribe link');
    const recorded = await inTransaction(this.pool, async (client) => {
      const states = await lockRecipients(client, [first.recipient_id as string]);
      const state = states.get(first.recipient_id as string);
      if (!state) return false;
      const now = await dbNow(client);
      let inserted = 0;
      if (state.recipient.email) {
        const { rowCount } = await client.query(
          'INSERT INTO opt_outs (organization_id, channel, address) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
          [first.organization_id, 'EMAIL', state.recipient.email.toLowerCase()],
        );
        inserted = rowCount ?? 0;
      }
      stop(state, 'unsubscribed', { now, minuteMs: this.options.minuteMs });
      await saveStates(client, [state], now);
      return inserted > 0;
    });
    return { form: toForm(await this.load(this.pool, token)), recorded };
  }

  async getSettings(organizationId: string): Promise<schedulerV1.OrganizationSettings> {
    const { rows } = await this.pool.query<{ low_rating_threshold: number; max_recipients: number }>(
      'SELECT low_rating_threshold, max_recipients FROM organization_settings WHERE organization_id = $1',
      [organizationId],
    );
    return {
      organizationId,
      lowRatingThreshold: rows[0]?.low_rating_threshold ?? DEFAULT_LOW_RATING_THRESHOLD,
      maxRecipientsPerRequest: rows[0]?.max_recipients ?? MAX_RECIPIENTS,
    };
  }

  /** `maxRecipientsPerRequest` 0 restores the default (500). */
  async setSettings(organizationId: string, lowRatingThreshold: number, maxRecipientsPerRequest = 0): Promise<schedulerV1.OrganizationSettings> {
    const errors: Array<{ pointer: string; detail: string }> = [];
    if (!Number.isInteger(lowRatingThreshold) || lowRatingThreshold < 0 || lowRatingThreshold > 5) {
      errors.push({ pointer: '/lowRatingThreshold', detail: 'an integer from 0 (never ask for feedback) to 5' });
    }
    if (!Number.isInteger(maxRecipientsPerRequest) || maxRecipientsPerRequest < 0 || maxRecipientsPerRequest > MAX_RECIPIENTS) {
      errors.push({ pointer: '/maxRecipientsPerRequest', detail: `an integer from 1 to ${MAX_RECIPIENTS} (0 = ${MAX_RECIPIENTS})` });
    }
    if (errors.length) throw new AppError(400, 'invalid_request', errors.map((e) => `${e.pointer}: ${e.detail}`).join('; '), { details: { errors } });
    const max = maxRecipientsPerRequest || MAX_RECIPIENTS;
    await this.pool.query(
      `INSERT INTO organization_settings (organization_id, low_rating_threshold, max_recipients) VALUES ($1, $2, $3)
       ON CONFLICT (organization_id) DO UPDATE SET low_rating_threshold = excluded.low_rating_threshold, max_recipients = excluded.max_recipients, updated_at = now()`,
      [organizationId, lowRatingThreshold, max],
    );
    return { organizationId, lowRatingThreshold, maxRecipientsPerRequest: max };
  }
}
