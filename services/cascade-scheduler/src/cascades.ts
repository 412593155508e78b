import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js';
import { eventSubject, EVENT_TYPES, schedulerV1 } from '@rrs/proto';
import { runIdempotent, type IdempotencyRequest } from '@rrs/idempotency';
import { AppError, injectTraceContext, inTransaction, type Pool, type PoolClient } from '@rrs/runtime';
import { tokenBatch, uuidv7Batch } from './ids';
import type { Directory, LocationInfo, SendingProfile } from './directory';
import { canReachAny, stop, type StepStatus } from './engine';
import type { Flow, FlowStep, Flows } from './flows';
import { dbNow, DUE_CHANNEL, lockRecipients, saveStates, writeOutbox } from './store';
import { finishEventFor } from './events';

export const MAX_RECIPIENTS = 500;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface RecipientInput {
  name: string;
  email: string;
  phone: string;
  contactId?: string;
  contactExternalId?: string;
}

export interface StartCascadeInput {
  organizationId: string;
  locationId: string;
  name: string;
  flowId: string;
  channel: string;
  externalId: string;
  recipients: RecipientInput[];
}

export type StartCascadeResult = Omit<schedulerV1.StartCascadeResponse, 'idempotentReplayed'>;

const startCodec = {
  encode: (v: StartCascadeResult) => schedulerV1.StartCascadeResponse.encode({ ...v, idempotentReplayed: false }).finish(),
  decode: (b: Uint8Array): StartCascadeResult => {
    const { idempotentReplayed: _ignored, ...rest } = schedulerV1.StartCascadeResponse.decode(b);
    return rest;
  },
};

export function tokenUrl(publicBaseUrl: string, kind: 'r' | 'u', token: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}/${kind}/${token}`;
}

/** Plan and account checks every send passes (402 `plan_required`, 409 `email_not_confirmed`). */
export function assertMaySend(profile: SendingProfile): void {
  if (profile.organization.plan === 'trial') throw new AppError(402, 'plan_required', 'a trial plan cannot send messages; upgrade the plan');
  if (!profile.organization.emailConfirmed) throw new AppError(409, 'email_not_confirmed', "the account's email address must be confirmed before sending");
}

export function templatesByChannel(profile: SendingProfile): Record<string, { subject: string; body: string }> {
  const out: Record<string, { subject: string; body: string }> = {};
  for (const t of profile.templates) out[t.channel] = { subject: t.subject, body: t.body };
  return out;
}

/**
 * Remembers which location/organization snapshot was last written, so concurrent starts for the same
 * location do not all queue on the same snapshot row; a change is written at once.
 */
export class SnapshotWriter {
  private readonly written = new Map<string, string>();

  async write(pool: Pool, organizationId: string, profile: SendingProfile, location: LocationInfo): Promise<void> {
    const key = `${organizationId}:${location.id}`;
    const value = JSON.stringify([profile.organization.name, profile.organization.locale, location.name, location.address, location.city, location.reviewLinks]);
    if (this.written.get(key) === value) return;
    await pool.query(
      `WITH o AS (
         INSERT INTO organization_settings (organization_id, name, locale) VALUES ($1, $2, $3)
         ON CONFLICT (organization_id) DO UPDATE SET name = excluded.name, locale = excluded.locale, updated_at = now())
       INSERT INTO location_snapshots (organization_id, location_id, name, review_links, address, city) VALUES ($1, $4, $5, $6, $7, $8)
       ON CONFLICT (organization_id, location_id) DO UPDATE
         SET name = excluded.name, review_links = excluded.review_links, address = excluded.address, city = excluded.city, updated_at = now()`,
      [organizationId, profile.organization.name, profile.organization.locale || 'en', location.id, location.name, JSON.stringify(location.reviewLinks), location.address, location.city],
    );
    this.written.set(key, value);
  }
}

export class Cascades {
  private readonly snapshots = new SnapshotWriter();

  constructor(
    private readonly pool: Pool,
    private readonly flows: Flows,
    private readonly directory: Directory,
  ) {}

  /**
   * Starts a cascade: the cascade, its recipients, their review links and steps, and the
   * Idempotency-Key record are written in ONE transaction with one statement; the first steps are due
   * at once and the dispatcher is woken on commit. A replay returns the saved answer and writes nothing.
   */
  async start(input: StartCascadeInput, idempotency?: IdempotencyRequest): Promise<{ result: StartCascadeResult; replayed: boolean }> {
    validateStart(input);
    // Directory answers are read before the transaction: a replay still answers from the saved record
    // (checked first inside runIdempotent), and no connection is held during the gRPC calls.
    const [profile, location, flow, limit] = await Promise.all([
      this.directory.getSendingProfile(input.organizationId),
      this.directory.getLocation(input.organizationId, input.locationId),
      this.resolveFlow(input),
      this.recipientLimit(input.organizationId),
    ]);
    if (input.recipients.length > limit) {
      const detail = `at most ${limit} recipients per request for this organization`;
      throw new AppError(400, 'invalid_request', `/recipients: ${detail}`, { details: { errors: [{ pointer: '/recipients', detail }] } });
    }
    const recipients = normalizeRecipients(input.recipients, profile.organization.defaultRegion);
    return runIdempotent(this.pool, idempotency, startCodec, async (client) => {
      assertMaySend(profile);
      if (input.channel) {
        const configured = profile.channels.some((c) => c.channel === input.channel && c.configured);
        if (!configured) throw new AppError(409, 'channel_not_configured', `the ${input.channel} channel is not configured for this organization`);
      }
      await this.snapshots.write(this.pool, input.organizationId, profile, location);
      return insertCascade(client, { ...input, recipients }, flow, profile);
    });
  }

  private async recipientLimit(organizationId: string): Promise<number> {
    const { rows } = await this.pool.query<{ max_recipients: number }>('SELECT max_recipients FROM organization_settings WHERE organization_id = $1', [organizationId]);
    return rows[0]?.max_recipients ?? MAX_RECIPIENTS;
  }

  private async resolveFlow(input: StartCascadeInput): Promise<Flow> {
    if (input.channel) return { id: '', organizationId: input.organizationId, name: input.channel, isDefault: false, steps: [{ order: 1, channel: input.channel, delayMinutes: 0 }] };
    if (input.flowId) return this.flows.get(input.organizationId, input.flowId);
    return this.flows.getDefault(input.organizationId);
  }

  /** Finishes every running recipient with reason `canceled`; returns how many were canceled. */
  async cancel(organizationId: string, id: string, minuteMs = 60_000): Promise<number> {
    if (!UUID.test(id)) throw new AppError(404, 'not_found', 'cascade not found');
    return inTransaction(this.pool, async (client) => {
      const { rows: c } = await client.query('SELECT 1 FROM cascades WHERE id = $1 AND organization_id = $2', [id, organizationId]);
      if (!c[0]) throw new AppError(404, 'not_found', 'cascade not found');
      const { rows } = await client.query<{ id: string }>(`SELECT id FROM recipients WHERE cascade_id = $1 AND status = 'running'`, [id]);
      const states = await lockRecipients(client, rows.map((r) => r.id));
      const now = await dbNow(client);
      let canceled = 0;
      for (const state of states.values()) {
        if (state.recipient.status !== 'running') continue;
        stop(state, 'canceled', { now, minuteMs });
        canceled++;
      }
      await saveStates(client, states.values(), now);
      return canceled;
    });
  }

  /** 404 `not_found` for an unknown id or another organization's cascade. */
  async get(organizationId: string, id: string): Promise<schedulerV1.Cascade> {
    if (!UUID.test(id)) throw new AppError(404, 'not_found', 'cascade not found');
    const { rows } = await this.pool.query(
      `SELECT id, organization_id, status, external_id, name, location_id, flow_id, channel, created_at, finished_at, skipped, recipients_total
         FROM cascades WHERE id = $1 AND organization_id = $2`,
      [id, organizationId],
    );
    const c = rows[0];
    if (!c) throw new AppError(404, 'not_found', 'cascade not found');
    const [{ rows: recipients }, { rows: steps }] = await Promise.all([
      this.pool.query(
        `SELECT r.id, r.name, r.email, r.phone, r.contact_external_id, r.status, r.finish_reason, r.rating, r.feedback, r.rated_at,
                r.finished_at, r.review_request_id, rr.opened_at
           FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id
          WHERE r.cascade_id = $1 ORDER BY r.position`,
        [id],
      ),
      this.pool.query(
        `SELECT recipient_id, step_order, channel, status, due_at, sent_at, skipped_at, dispatched_at, delivered_at, reason, reroutes, sent_channel
           FROM recipient_steps WHERE cascade_id = $1 ORDER BY recipient_id, step_order`,
        [id],
      ),
    ]);
    const stepsOf = new Map<string, schedulerV1.RecipientStep[]>();
    const counts: Record<string, number> = {
      recipients: c.recipients_total, queued: c.recipients_total - c.skipped, skipped: c.skipped, running: 0, finished: 0,
      rated: 0, exhausted: 0, unreachable: 0, unsubscribed: 0, canceled: 0, opened: 0, feedback: 0,
      stepsSent: 0, stepsFailed: 0, stepsSkipped: 0, stepsPending: 0,
    };
    for (const s of steps) {
      const list = stepsOf.get(s.recipient_id) ?? [];
      list.push({
        order: s.step_order,
        channel: s.channel,
        status: s.status,
        dueAt: s.due_at ?? undefined,
        sentAt: s.sent_at ?? undefined,
        skippedAt: s.skipped_at ?? undefined,
        dispatchedAt: s.dispatched_at ?? undefined,
        deliveredAt: s.delivered_at ?? undefined,
        reason: s.reason ?? '',
        reroutes: (s.reroutes as Array<{ from: string; to: string; reason: string }>).map((x) => ({ fromChannel: x.from, toChannel: x.to, reason: x.reason })),
        sentChannel: s.sent_channel,
      });
      stepsOf.set(s.recipient_id, list);
      const st = s.status as StepStatus;
      if (st === 'sent') counts.stepsSent++;
      else if (st === 'failed') counts.stepsFailed++;
      else if (st === 'skipped') counts.stepsSkipped++;
      else if (st === 'pending' || st === 'scheduled' || st === 'dispatched') counts.stepsPending++;
    }
    for (const r of recipients) {
      counts[r.status]++;
      if (r.finish_reason) counts[r.finish_reason]++;
      if (r.opened_at) counts.opened++;
      if (r.feedback) counts.feedback++;
    }
    return {
      id: c.id,
      organizationId: c.organization_id,
      status: c.status,
      externalId: c.external_id ?? '',
      hasExternalId: c.external_id !== null,
      name: c.name,
      locationId: c.location_id,
      flowId: c.flow_id ?? '',
      channel: c.channel ?? '',
      counts: Object.entries(counts).map(([key, value]) => ({ key, value })),
      recipients: recipients.map((r) => ({
        id: r.id,
        name: r.name,
        email: r.email,
        phone: r.phone,
        contactExternalId: r.contact_external_id,
        status: r.status,
        finishReason: r.finish_reason ?? '',
        rating: r.rating ?? 0,
        feedback: r.feedback ?? '',
        ratedAt: r.rated_at ?? undefined,
        finishedAt: r.finished_at ?? undefined,
        steps: stepsOf.get(r.id) ?? [],
        reviewRequestId: r.review_request_id,
      })),
      createdAt: c.created_at,
      finishedAt: c.finished_at ?? undefined,
    };
  }
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * Phones to E.164 (numbers without a country code read in the organization's region), emails
 * trimmed; a malformed one is a 400 naming the recipient, and nothing is created.
 */
export function normalizeRecipients(recipients: RecipientInput[], defaultRegion = 'RU'): RecipientInput[] {
  const errors: Array<{ pointer: string; detail: string }> = [];
  const out = recipients.map((r, i) => {
    const email = r.email.trim();
    if (email && (!EMAIL.test(email) || email.length > 254)) errors.push({ pointer: `/recipients/${i}/email`, detail: 'not an email address' });
    let phone = r.phone.trim();
    if (phone) {
      const parsed = parsePhoneNumberFromString(phone, (defaultRegion || 'RU') as CountryCode);
      if (!parsed || !parsed.isValid()) errors.push({ pointer: `/recipients/${i}/phone`, detail: 'not a valid phone number' });
      else phone = parsed.number;
    }
    return { ...r, name: r.name.trim(), email, phone };
  });
  if (errors.length) throw new AppError(400, 'invalid_request', errors.slice(0, 5).map((e) => `${e.pointer}: ${e.detail}`).join('; '), { details: { errors } });
  return out;
}

function validateStart(input: StartCascadeInput): void {
  const errors: Array<{ pointer: string; detail: string }> = [];
  if (!input.locationId) errors.push({ pointer: '/locationId', detail: 'required' });
  if (input.flowId && input.channel) errors.push({ pointer: '/channel', detail: 'flowId and channel are mutually exclusive' });
  if (input.recipients.length < 1 || input.recipients.length > MAX_RECIPIENTS) {
    errors.push({ pointer: '/recipients', detail: `1 to ${MAX_RECIPIENTS} recipients per request` });
  }
  if (input.channel && !/^[A-Z][A-Z0-9_]*$/.test(input.channel)) errors.push({ pointer: '/channel', detail: 'not a channel key' });
  if (errors.length) throw new AppError(400, 'invalid_request', errors.map((e) => `${e.pointer}: ${e.detail}`).join('; '), { details: { errors } });
}

/**
 * The whole intake in one statement (data-modifying CTEs over unnest arrays): one round trip whatever
 * the number of recipients. A recipient none of whose steps has its contact field is stored finished
 * (`unreachable`, steps skipped `no_contact`), counted in `skipped`, and gets its finish event.
 */
async function insertCascade(client: PoolClient, input: StartCascadeInput, flow: Flow, profile: SendingProfile): Promise<StartCascadeResult> {
  const nowRes = await client.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  const now = nowRes.rows[0].now;
  const cascadeId = uuidv7Batch(1, now.getTime())[0];
  const channels = flow.steps.map((s) => s.channel);
  const n = input.recipients.length;
  const rIds: string[] = [];
  const rrIds: string[] = [];
  const tokens: string[] = [];
  const rStatus: string[] = [];
  const rReason: Array<string | null> = [];
  const sId: string[] = [];
  const sRecipient: string[] = [];
  const sOrder: number[] = [];
  const sChannel: string[] = [];
  const sDelay: number[] = [];
  const sStatus: string[] = [];
  const sDue: Array<Date | null> = [];
  const sReason: Array<string | null> = [];
  const skippedIdx: number[] = [];
  const ids = uuidv7Batch(n * (2 + flow.steps.length), now.getTime());
  let nextId = 0;
  const tokenList = tokenBatch(n);
  for (let i = 0; i < n; i++) {
    const r = input.recipients[i];
    const rid = ids[nextId++];
    rIds.push(rid);
    rrIds.push(ids[nextId++]);
    tokens.push(tokenList[i]);
    const reachable = canReachAny(channels, r);
    if (!reachable) skippedIdx.push(i);
    rStatus.push(reachable ? 'running' : 'finished');
    rReason.push(reachable ? null : 'unreachable');
    flow.steps.forEach((st: FlowStep, k: number) => {
      sId.push(ids[nextId++]);
      sRecipient.push(rid);
      sOrder.push(st.order);
      sChannel.push(st.channel);
      sDelay.push(st.delayMinutes);
      // Step 1 is due at once, whatever its delay; later steps wait for the previous one's outcome.
      sStatus.push(!reachable ? 'skipped' : k === 0 ? 'scheduled' : 'pending');
      sDue.push(reachable && k === 0 ? now : null);
      sReason.push(reachable ? null : 'no_contact');
    });
  }
  const queued = n - skippedIdx.length;
  const status = queued === 0 ? 'finished' : 'running';
  const templates = templatesByChannel(profile);
  // The StartCascade span's context: every message of this cascade is published as its child.
  const traceContext = injectTraceContext({});
  await client.query(
    `WITH c AS (
       INSERT INTO cascades (id, organization_id, location_id, name, flow_id, channel, external_id, status, locale, templates, flow_steps,
                             recipients_total, skipped, active_recipients, created_at, finished_at, trace_context)
       VALUES ($1::uuid, $2::uuid, $3::text, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::timestamptz, CASE WHEN $14::int = 0 THEN $15::timestamptz END, $35::jsonb)
     ), rr AS (
       INSERT INTO review_requests (id, organization_id, token, location_id, recipient_id, customer_name, contact, created_at)
       SELECT u.id, $2::uuid, u.token, $3::text, u.rid, u.name, coalesce(nullif(u.email, ''), u.phone), $15::timestamptz
         FROM unnest($16::uuid[], $17::text[], $18::uuid[], $19::text[], $20::text[], $21::text[]) AS u(id, token, rid, name, email, phone)
     ), r AS (
       INSERT INTO recipients (id, cascade_id, organization_id, position, name, email, phone, contact_id, contact_external_id, status,
                               finish_reason, finished_at, review_request_id)
       SELECT u.rid, $1::uuid, $2::uuid, u.pos, u.name, u.email, u.phone, u.cid, u.cext, u.status, u.reason, CASE WHEN u.reason IS NOT NULL THEN $15::timestamptz END, u.rrid
         FROM unnest($18::uuid[], $22::int[], $19::text[], $20::text[], $21::text[], $23::text[], $24::text[], $25::text[], $26::text[], $16::uuid[])
              AS u(rid, pos, name, email, phone, cid, cext, status, reason, rrid)
     )
     INSERT INTO recipient_steps (id, recipient_id, cascade_id, organization_id, step_order, channel, delay_minutes, status, sent_channel,
                                  due_at, skipped_at, reason)
     SELECT u.id, u.rid, $1::uuid, $2::uuid, u.ord, u.ch, u.delay, u.status, u.ch, u.due, CASE WHEN u.status = 'skipped' THEN $15::timestamptz END, u.reason
       FROM unnest($27::uuid[], $28::uuid[], $29::int[], $30::text[], $31::int[], $32::text[], $33::timestamptz[], $34::text[])
            AS u(id, rid, ord, ch, delay, status, due, reason)`,
    [
      cascadeId, input.organizationId, input.locationId, input.name, flow.id || null, input.channel || null, input.externalId || null, status,
      profile.organization.locale || 'en', JSON.stringify(templates), JSON.stringify(flow.steps), n, skippedIdx.length, queued, now,
      rrIds, tokens, rIds, input.recipients.map((r) => r.name), input.recipients.map((r) => r.email), input.recipients.map((r) => r.phone),
      input.recipients.map((_, i) => i), input.recipients.map((r) => r.contactId ?? ''), input.recipients.map((r) => r.contactExternalId ?? ''),
      rStatus, rReason,
      sId, sRecipient, sOrder, sChannel, sDelay, sStatus, sDue, sReason,
      JSON.stringify(traceContext),
    ],
  );
  if (skippedIdx.length) {
    const events = skippedIdx.map((i) =>
      finishEventFor({
        organizationId: input.organizationId,
        cascadeId,
        cascadeExternalId: input.externalId || null,
        locationId: input.locationId,
        reviewRequestId: rrIds[i],
        recipient: { id: rIds[i], ...input.recipients[i] },
        rating: null,
        feedback: null,
        reason: 'unreachable',
        steps: flow.steps.map((s) => ({ order: s.order, channel: s.channel, status: 'skipped', reason: 'no_contact', sentAt: null, reroutedTo: '' })),
        finishedAt: now,
      }),
    ).map((e) => ({ ...e, headers: traceContext }));
    await writeOutbox(client, eventSubject(EVENT_TYPES.cascadeRecipientFinished), events);
  }
  if (queued > 0) await client.query('SELECT pg_notify($1, $2)', [DUE_CHANNEL, String(now.getTime())]);
  return {
    id: cascadeId,
    status,
    queued,
    skipped: skippedIdx.length,
    flow: { id: flow.id, organizationId: input.organizationId, name: flow.name, isDefault: flow.isDefault, steps: flow.steps },
    channel: input.channel,
    externalId: input.externalId,
  };
}

