import {
  isOneOf, MAX_NOTE_LENGTH, MAX_REPLY_LENGTH, MAX_REPLY_SUBJECT_LENGTH, RATING_ACTIONS, SYSTEM_EMAIL_SUBJECT, systemEmailBusV1, systemEmailMsgId, type schedulerV1,
} from '@rrs/proto';
import { ConflictError, InvalidError, inTransaction, NotFoundError, UnavailableError, type Bus, type Pool, type PoolClient } from '@rrs/runtime';
import { inboxSettingsOf } from './alertSettings';
import { isUuid } from './ids';
import { ratingEntry } from './listRatings';
import { suppressedAmong } from './optOutLedger';
import type { OrganizationProfiles } from './organizationProfiles';
import type { AddressHasher } from './personHash';

/*
 * The ratings inbox as a workflow (docs/console.md, "The ratings inbox"): a member takes a rating (in
 * progress), resolves it with a note, reopens it, adds notes, and replies to the customer by email.
 * Every change is a row of the rating's history with who and when, written in the change's transaction.
 */

export interface InboxDeps {
  pool: Pool;
  bus?: Bus;
  profiles: OrganizationProfiles;
  hasher: AddressHasher;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The customer's email and phone: the recipient's, or the review request's contact. */
async function customerOf(db: Pool | PoolClient, reviewRequestId: string): Promise<{ email: string; phone: string; name: string; locationName: string; organizationId: string }> {
  const { rows } = await db.query<{ email: string | null; phone: string | null; contact: string; customer_name: string; location_name: string | null; organization_id: string }>(
    `SELECT r.email, r.phone, rr.contact, rr.customer_name, ls.name AS location_name, rr.organization_id
       FROM review_requests rr LEFT JOIN recipients r ON r.id = rr.recipient_id
       LEFT JOIN location_snapshots ls ON ls.organization_id = rr.organization_id AND ls.location_id = rr.location_id
      WHERE rr.id = $1`,
    [reviewRequestId],
  );
  const row = rows[0];
  const email = row.email || (EMAIL.test(row.contact) ? row.contact : '');
  const phone = row.phone || (row.contact.startsWith('+') ? row.contact : '');
  return { email: email.toLowerCase(), phone, name: row.customer_name, locationName: row.location_name ?? '', organizationId: row.organization_id };
}

/** Why a reply by email is not possible now ('' when it is): no email, or the person is in the opt-out ledger (one opt-out covers every channel). */
async function replyRefusal(db: Pool | PoolClient, hasher: AddressHasher, customer: { email: string; phone: string; organizationId: string }): Promise<'' | 'customer_has_no_email' | 'customer_opted_out'> {
  if (!customer.email) return 'customer_has_no_email';
  const suppressed = await suppressedAmong(db, hasher, [customer.organizationId], [customer.email, customer.phone].filter(Boolean));
  return suppressed.size > 0 ? 'customer_opted_out' : '';
}

export async function getRating({ pool, hasher }: Pick<InboxDeps, 'pool' | 'hasher'>, request: schedulerV1.GetRatingRequest): Promise<schedulerV1.GetRatingResponse> {
  const rating = await ratingEntry(pool, request.organizationId, request.reviewRequestId);
  const { rows } = await pool.query<{ at: Date; member_id: string; kind: string; text: string; target: string }>(
    'SELECT at, member_id, kind, text, target FROM rating_history WHERE review_request_id = $1 ORDER BY at, id',
    [request.reviewRequestId],
  );
  const refusal = await replyRefusal(pool, hasher, await customerOf(pool, request.reviewRequestId));
  return { rating, history: rows.map((r) => ({ at: r.at, memberId: r.member_id, kind: r.kind, text: r.text, target: r.target })), canReply: refusal === '', replyRefusal: refusal };
}

function noteProblem(note: string, required: boolean): string | null {
  const trimmed = note.trim();
  if (required && trimmed.length === 0) return `a note of 1 to ${MAX_NOTE_LENGTH} characters`;
  if (trimmed.length > MAX_NOTE_LENGTH) return `at most ${MAX_NOTE_LENGTH} characters`;
  return null;
}

/**
 * A member's action on a rating: `assign` (to a member of the organization: in progress), `unassign`,
 * `resolve` (with a note), `reopen`, `note`. A resolved rating is reopened before it is assigned again
 * (409 `rating_resolved`); only a resolved one reopens (409 `rating_not_resolved`). Nothing changes on a
 * refusal.
 */
export async function updateRating(deps: InboxDeps, request: schedulerV1.UpdateRatingRequest): Promise<schedulerV1.UpdateRatingResponse> {
  if (!isOneOf(RATING_ACTIONS, request.action)) throw InvalidError.field('/action', `one of ${RATING_ACTIONS.join(', ')}`);
  const note = request.note.trim();
  const problem = request.action === 'resolve' || request.action === 'note' ? noteProblem(request.note, true) : null;
  if (problem) throw InvalidError.field('/note', problem);
  await ratingEntry(deps.pool, request.organizationId, request.reviewRequestId);
  if (request.action === 'assign') {
    const members = await deps.profiles.listMembers(request.organizationId);
    if (!members.some((member) => member.id === request.assigneeId)) throw InvalidError.field('/assigneeId', 'a member of the organization');
  }
  return inTransaction(deps.pool, async (client) => {
    const { rows } = await client.query<{ handled_at: Date | null; assigned_to: string | null }>('SELECT handled_at, assigned_to FROM ratings WHERE review_request_id = $1 AND organization_id = $2 FOR UPDATE', [request.reviewRequestId, request.organizationId]);
    const current = rows[0];
    if (!current) throw new NotFoundError('rating');
    const history = async (kind: string, text = '', target = '') =>
      client.query('INSERT INTO rating_history (review_request_id, organization_id, member_id, kind, text, target) VALUES ($1, $2, $3, $4, $5, $6)', [request.reviewRequestId, request.organizationId, request.memberId, kind, text, target]);
    const resolved = current.handled_at !== null;
    switch (request.action) {
      case 'assign':
        if (resolved) throw new ConflictError('rating_resolved', 'the rating is resolved; reopen it first');
        await client.query('UPDATE ratings SET assigned_to = $2 WHERE review_request_id = $1', [request.reviewRequestId, request.assigneeId]);
        await history('assigned', '', request.assigneeId);
        break;
      case 'unassign':
        if (resolved) throw new ConflictError('rating_resolved', 'the rating is resolved; reopen it first');
        await client.query('UPDATE ratings SET assigned_to = NULL WHERE review_request_id = $1', [request.reviewRequestId]);
        await history('unassigned', '', current.assigned_to ?? '');
        break;
      case 'resolve':
        if (resolved) throw new ConflictError('rating_resolved', 'the rating is already resolved');
        await client.query('UPDATE ratings SET handled_at = now(), handled_by = $2, resolution_note = $3 WHERE review_request_id = $1', [request.reviewRequestId, request.memberId, note]);
        await history('resolved', note);
        break;
      case 'reopen':
        if (!resolved) throw new ConflictError('rating_not_resolved', 'only a resolved rating is reopened');
        await client.query('UPDATE ratings SET handled_at = NULL, handled_by = NULL, resolution_note = NULL WHERE review_request_id = $1', [request.reviewRequestId]);
        await history('reopened');
        break;
      case 'note':
        await history('noted', note);
        break;
    }
    return { rating: await ratingEntry(client, request.organizationId, request.reviewRequestId) };
  });
}

/**
 * A member's reply to the customer, by email (SystemEmail `customer_reply` on `steps.system.email`),
 * from the service's sender with the organization's Reply-To (else the member's email), so the
 * customer's answer reaches the business. Refused (409, nothing sent) when the customer has no email or
 * is in the opt-out ledger. Recorded in the history with the reply's id: the same id again sends nothing.
 */
export async function replyToRating(deps: InboxDeps, request: schedulerV1.ReplyToRatingRequest): Promise<schedulerV1.ReplyToRatingResponse> {
  const problems: Array<{ pointer: string; detail: string }> = [];
  const text = request.text.trim();
  const subject = request.subject.trim().replace(/[\r\n]+/g, ' ');
  if (text.length === 0 || text.length > MAX_REPLY_LENGTH) problems.push({ pointer: '/text', detail: `1 to ${MAX_REPLY_LENGTH} characters` });
  if (subject.length > MAX_REPLY_SUBJECT_LENGTH) problems.push({ pointer: '/subject', detail: `at most ${MAX_REPLY_SUBJECT_LENGTH} characters` });
  if (!isUuid(request.replyId)) problems.push({ pointer: '/replyId', detail: 'a UUID, one per reply' });
  if (problems.length > 0) throw new InvalidError(problems, { message: problems.map((p) => `${p.pointer} ${p.detail}`).join('; ') });
  await ratingEntry(deps.pool, request.organizationId, request.reviewRequestId);
  const customer = await customerOf(deps.pool, request.reviewRequestId);
  const refusal = await replyRefusal(deps.pool, deps.hasher, customer);
  if (refusal === 'customer_has_no_email') throw new ConflictError(refusal, 'the customer left no email address: there is nowhere to reply');
  if (refusal === 'customer_opted_out') throw new ConflictError(refusal, 'the customer opted out: nothing more is sent to them');
  // The bus is away: nothing is recorded, so the member can send the reply again.
  if (!deps.bus || !deps.bus.isConnected()) throw new UnavailableError('the email channel cannot be reached now; try again');
  const profile = await deps.profiles.getSendingProfile(request.organizationId);
  const settings = await inboxSettingsOf(deps.pool, request.organizationId);
  const replyTo = settings.replyTo || request.memberEmail;
  const bus = deps.bus;
  return inTransaction(deps.pool, async (client) => {
    const { rowCount } = await client.query(
      `INSERT INTO rating_history (review_request_id, organization_id, member_id, kind, text, target, reply_id) VALUES ($1, $2, $3, 'replied', $4, $5, $6) ON CONFLICT (reply_id) DO NOTHING`,
      [request.reviewRequestId, request.organizationId, request.memberId, text, customer.email, request.replyId],
    );
    if (rowCount) {
      const email = systemEmailBusV1.SystemEmail.encode(systemEmailBusV1.SystemEmail.fromPartial({
        id: `reply.${request.replyId}`, kind: 'customer_reply', to: customer.email, locale: profile.organization.locale, link: '', organizationId: request.organizationId,
        organizationName: profile.organization.name, timeZone: profile.organization.timeZone || 'UTC',
        subject: subject || defaultSubject(profile.organization.locale, customer.locationName || profile.organization.name), text, replyTo,
      })).finish();
      await bus.publish(SYSTEM_EMAIL_SUBJECT, email, { msgId: systemEmailMsgId(`reply.${request.replyId}`) });
    }
    return { to: customer.email, sent: Boolean(rowCount), rating: await ratingEntry(client, request.organizationId, request.reviewRequestId) };
  });
}

const defaultSubject = (locale: string, place: string) => (locale.toLowerCase().startsWith('ru') ? `Ответ на ваш отзыв о ${place}` : `About your feedback on ${place}`);

