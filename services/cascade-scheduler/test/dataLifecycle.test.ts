import { eventsV1, PERSON_ERASED_SUBJECT, PERSON_ERASED_TYPE } from '@rrs/proto';
import { testLogger, waitFor } from '@rrs/testkit';
import { AddressHasher, DEVELOPMENT_PERSON_HASH_KEY, erasePerson, retentionRound } from '../src';
import { RATING_DIGESTS_KEEP_DAYS, STAFF_LINK_CODES_KEEP_DAYS } from '../src/retention';
import { LOCATION, ORG, rejection, startHarness, type Harness } from './harness';

const hasher = new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY);
const MINUTE_MS = 50;
const DAY_MS = MINUTE_MS * 1440;

/**
 * The scheduler's side of the data lifecycle (issue 35, docs/customer-respect.md "Data lifecycle"):
 * erasing a person anonymizes every row of this schema that held them while ratings and counts stay
 * and their opt-out still holds; retention does the same to recipients finished longer ago than the
 * organization's setting, in small batches, with evidence rows.
 */
describe('data lifecycle in the scheduler: erasure and retention', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: MINUTE_MS, sender: { channels: ['EMAIL', 'SMS'] }, feedbackWindowMinutes: 1, config: { retentionIntervalMs: 3_600_000 } });
    await h.scheduler.flows.create({ organizationId: ORG, name: 'email then sms', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1 }] });
  });
  afterAll(async () => {
    await h.close();
  });

  let orders = 0;
  async function throughCascade(person: { name: string; email: string; phone: string; contactExternalId?: string }, rating: number, feedback: string) {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: '', externalId: `order-${++orders}`,
      recipients: [{ ...person, contactId: '', contactExternalId: person.contactExternalId ?? '' }],
    });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps.every((step) => step.status === 'sent'), { what: 'both steps sent' });
    const { rows } = await h.pool.query('SELECT rr.token, r.id FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    await h.scheduler.reviews.getForm(rows[0].token, true);
    await h.scheduler.reviews.submitRating(rows[0].token, rating);
    if (feedback) await h.scheduler.reviews.submitFeedback(rows[0].token, feedback);
    return { cascadeId: result.id, token: rows[0].token as string, recipientId: rows[0].id as string };
  }

  /** Every text, jsonb and bytea column of every table of the schema that contains `needle` (case-insensitive). */
  async function whereFound(needle: string): Promise<string[]> {
    const { rows: columns } = await h.pool.query<{ table_name: string; column_name: string; data_type: string }>(
      `SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name)
        WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND c.data_type IN ('text', 'jsonb', 'bytea', 'character varying', 'ARRAY')`,
    );
    const found: string[] = [];
    for (const { table_name: table, column_name: column, data_type: type } of columns) {
      const asText = type === 'bytea' ? `encode("${column}", 'escape')` : `"${column}"::text`;
      const { rows } = await h.pool.query(`SELECT count(*)::int AS n FROM "${table}" WHERE position(lower($1) IN lower(${asText})) > 0`, [needle]);
      if (rows[0].n > 0) found.push(`${table}.${column}`);
    }
    return found;
  }

  async function stats() {
    const day = new Date().toISOString().slice(0, 10);
    const overview = await h.scheduler.reviews.overview({ organizationId: ORG, fromDay: day, toDay: day, timeZone: 'UTC' });
    const { rows } = await h.pool.query(`SELECT count(*)::int AS recipients, (SELECT count(*)::int FROM ratings) AS ratings, (SELECT avg(rating)::float8 FROM ratings) AS average,
                                                (SELECT count(*)::int FROM feedback) AS feedback, (SELECT count(*)::int FROM recipient_steps WHERE status = 'sent') AS sent FROM recipients`);
    return { total: overview.total, ratingCounts: overview.ratingCounts, byChannel: overview.byChannel, ...rows[0] };
  }

  it('erasing a person leaves their email, phone, name and external id in no column, keeps ratings and counts, and their opt-out holds', async () => {
    const anna = { name: 'Annushka Erasova', email: 'Annushka.Erasova@example.com', phone: '+79160000031', contactExternalId: 'crm-annushka' };
    const boris = { name: 'Boris Keptov', email: 'boris.keptov@example.com', phone: '+79160000032' };
    const erased = await throughCascade(anna, 2, 'Annushka says the coffee was cold');
    await throughCascade(boris, 5, '');
    await h.scheduler.reviews.unsubscribe({ token: erased.token, oneClick: false });
    // The finish events (with the feedback) went out to the bus.
    await waitFor(async () => (await h.pool.query('SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL')).rows[0].n === 0, { what: 'events published' });
    for (const needle of ['annushka', '+79160000031', 'Erasova']) expect(await whereFound(needle)).not.toEqual([]);
    const before = await stats();

    const counts = await erasePerson(h.pool, hasher, { organizationId: ORG, requestId: 'erasure-1', actor: 'api:key-1', email: 'ANNUSHKA.erasova@example.com', phone: '', contactExternalId: '' });
    expect(counts).toMatchObject({ recipients: 1, review_requests: 1, feedback: 1, suppressions: 2 });

    for (const needle of ['annushka', '+79160000031', '79160000031', 'Erasova', 'crm-annushka', 'coffee was cold']) expect({ needle, found: await whereFound(needle) }).toEqual({ needle, found: [] });
    // Boris is untouched; the counts, the funnel and the ratings are the same.
    expect(await whereFound('boris.keptov@example.com')).not.toEqual([]);
    expect(await stats()).toEqual(before);
    const cascade = await h.scheduler.cascades.get(ORG, erased.cascadeId);
    expect(cascade.recipients[0]).toMatchObject({ name: '', email: '', phone: '', contactExternalId: '', rating: 2 });

    // Only this organization's opt-out checks hash the addresses they look up from now on.
    expect((await h.pool.query('SELECT organization_id FROM hashed_ledger_organizations')).rows).toEqual([{ organization_id: ORG }]);
    // The opt-out still holds, by either address: a new request for her is skipped, nothing is sent.
    const again = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: '', externalId: 'order-again',
      recipients: [{ name: 'Annushka', email: '', phone: '+79160000031', contactId: '', contactExternalId: '' }] });
    expect(again.result).toMatchObject({ queued: 0, skipped: 1 });
    // The evidence names the request and who asked, with hashes only.
    const { rows: evidence } = await h.pool.query(`SELECT kind, request_id, actor, subject_hashes, counts FROM lifecycle_actions WHERE kind = 'erasure'`);
    expect(evidence).toEqual([{ kind: 'erasure', request_id: 'erasure-1', actor: 'api:key-1', subject_hashes: expect.arrayContaining([hasher.hash('annushka.erasova@example.com'), hasher.hash('+79160000031')]), counts: counts }]);
    // The other services are told by ids only (events.lifecycle.person_erased, through the outbox).
    const announced = async () => (await h.pool.query<{ msg_id: string; payload: Buffer }>(`SELECT msg_id, payload FROM outbox WHERE subject = $1 ORDER BY id`, [PERSON_ERASED_SUBJECT])).rows;
    const { rows: steps } = await h.pool.query<{ id: string }>('SELECT id FROM recipient_steps WHERE recipient_id = $1', [erased.recipientId]);
    const [event] = await announced();
    const decoded = eventsV1.Event.decode(event.payload);
    expect(decoded).toMatchObject({ type: PERSON_ERASED_TYPE, organizationId: ORG });
    expect(decoded.payload).toEqual({ $case: 'personErased', personErased: {
      erasureId: 'erasure-1', reason: eventsV1.ErasureReason.ERASURE_REASON_REQUEST, recipientIds: [erased.recipientId], stepIds: expect.arrayContaining(steps.map((step) => step.id)), cascadeIds: [erased.cascadeId], reviewRequestIds: [expect.any(String)],
    } });
    // Erasing again finds nothing more, and announces nothing more.
    expect(await erasePerson(h.pool, hasher, { organizationId: ORG, requestId: 'erasure-2', actor: 'admin', email: anna.email, phone: '', contactExternalId: '' })).toEqual({});
    expect(await announced()).toHaveLength(1);
  });

  it('an erasure without any identifier is refused and changes nothing', async () => {
    const count = async () => (await h.pool.query('SELECT count(*)::int AS n FROM lifecycle_actions')).rows[0].n;
    const before = await count();
    const refused = await rejection(erasePerson(h.pool, hasher, { organizationId: ORG, requestId: 'erasure-3', actor: 'admin', email: ' ', phone: '', contactExternalId: '' }));
    expect(refused).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(await count()).toBe(before);
  });

  it('retention anonymizes recipients finished longer ago than the organization keeps them, in batches, on the fast clock', async () => {
    await h.pool.query(`INSERT INTO organization_settings (organization_id, personal_data_retention_days) VALUES ($1, 30)
                        ON CONFLICT (organization_id) DO UPDATE SET personal_data_retention_days = 30`, [ORG]);
    const old1 = await throughCascade({ name: 'Olga Oldova', email: 'olga.oldova@example.com', phone: '+79160000041' }, 4, 'Olga liked it');
    const old2 = await throughCascade({ name: 'Oleg Oldov', email: 'oleg.oldov@example.com', phone: '+79160000042' }, 1, '');
    const recent = await throughCascade({ name: 'Rita Recent', email: 'rita.recent@example.com', phone: '+79160000043' }, 3, '');
    // Finished 31 and 40 (fast-clock) days ago, and 29 days ago: only the first two are past 30 days.
    await h.pool.query(`UPDATE recipients SET finished_at = now() - $2 * interval '1 millisecond' WHERE id = $1`, [old1.recipientId, 31 * DAY_MS]);
    await h.pool.query(`UPDATE recipients SET finished_at = now() - $2 * interval '1 millisecond' WHERE id = $1`, [old2.recipientId, 40 * DAY_MS]);
    await h.pool.query(`UPDATE recipients SET finished_at = now() - $2 * interval '1 millisecond' WHERE id = $1`, [recent.recipientId, 29 * DAY_MS]);
    // Their cooldown rows are as old as their last message and rating.
    await h.pool.query(`UPDATE person_activity SET last_sent_at = now() - $1 * interval '1 millisecond', last_rated_at = now() - $1 * interval '1 millisecond'
                         WHERE address IN ('olga.oldova@example.com', '+79160000041', 'oleg.oldov@example.com', '+79160000042')`, [31 * DAY_MS]);
    // Their events went out a month ago: the relay purged them after a day (outboxRelay.ts), as it does here.
    await waitFor(async () => (await h.pool.query('SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL')).rows[0].n === 0, { what: 'events published' });
    await h.pool.query('DELETE FROM outbox WHERE published_at IS NOT NULL');
    const before = await stats();

    // A round takes at most one batch per organization: the oldest first.
    const first = await retentionRound({ pool: h.pool, hasher, logger: testLogger(), dayMs: DAY_MS, batchSize: 1 });
    expect(first).toMatchObject({ more: true, organizations: 1, counts: { recipients: 1 } });
    expect(await whereFound('oleg.oldov')).toEqual([]);
    expect(await whereFound('olga.oldova')).not.toEqual([]);
    expect(await retentionRound({ pool: h.pool, hasher, logger: testLogger(), dayMs: DAY_MS, batchSize: 1 })).toMatchObject({ more: true, counts: { recipients: 1, feedback: 1 } });
    expect(await retentionRound({ pool: h.pool, hasher, logger: testLogger(), dayMs: DAY_MS, batchSize: 1 })).toMatchObject({ more: false, organizations: 0 });
    for (const needle of ['Olga', 'Oleg', '+79160000041', 'Olga liked it']) expect({ needle, found: await whereFound(needle) }).toEqual({ needle, found: [] });
    expect(await whereFound('rita.recent@example.com')).not.toEqual([]);
    expect(await stats()).toEqual(before);
    const { rows: evidence } = await h.pool.query(`SELECT actor, counts FROM lifecycle_actions WHERE kind = 'retention' ORDER BY id`);
    expect(evidence.length).toBeGreaterThanOrEqual(2);
    expect(evidence.every((row) => row.actor === 'retention' && row.counts.recipients >= 1)).toBe(true);
    // Each batch told the other services, by ids only, as an erasure does (reason retention): the oldest first.
    const { rows: announced } = await h.pool.query<{ msg_id: string; payload: Buffer }>(`SELECT msg_id, payload FROM outbox WHERE subject = $1 ORDER BY id`, [PERSON_ERASED_SUBJECT]);
    expect(announced.map((row) => row.msg_id)).toEqual([`person-erased:retention:${ORG}:${old2.recipientId}`, `person-erased:retention:${ORG}:${old1.recipientId}`]);
    const { rows: steps } = await h.pool.query<{ id: string }>('SELECT id FROM recipient_steps WHERE recipient_id = $1', [old1.recipientId]);
    expect(eventsV1.Event.decode(announced[1].payload)).toMatchObject({ type: PERSON_ERASED_TYPE, organizationId: ORG, payload: { $case: 'personErased', personErased: {
      erasureId: '', reason: eventsV1.ErasureReason.ERASURE_REASON_RETENTION, recipientIds: [old1.recipientId], stepIds: expect.arrayContaining(steps.map((step) => step.id)),
      cascadeIds: [old1.cascadeId], reviewRequestIds: [expect.any(String)],
    } } });
    for (const row of announced) for (const needle of ['Olga', 'Oleg', 'oldov', '7916000004']) expect(row.payload.toString('latin1')).not.toContain(needle);
  });

  it('a round prunes rating digests past a week and staff link codes a day past expiry, nothing younger', async () => {
    const member = (n: number) => `member-${n}`;
    // A digest's day is a calendar day: its age is in real days, even on the fast clock.
    await h.pool.query(`INSERT INTO rating_digests (organization_id, member_id, day) VALUES ($1, $2, current_date - $4::int), ($1, $3, current_date - $5::int)`,
      [ORG, member(1), member(2), RATING_DIGESTS_KEEP_DAYS + 2, RATING_DIGESTS_KEEP_DAYS - 1]);
    await h.pool.query(`INSERT INTO staff_link_codes (code, organization_id, channel, member_id, expires_at) VALUES ('old-code', $1, 'TELEGRAM', 'm', now() - $2 * interval '1 millisecond'), ('live-code', $1, 'TELEGRAM', 'm', now() + interval '1 hour')`,
      [ORG, (STAFF_LINK_CODES_KEEP_DAYS + 1) * DAY_MS]);
    const round = await retentionRound({ pool: h.pool, hasher, logger: testLogger(), dayMs: DAY_MS });
    expect(round.counts).toMatchObject({ rating_digests: 1, staff_link_codes: 1 });
    expect((await h.pool.query(`SELECT member_id FROM rating_digests WHERE member_id LIKE 'member-%'`)).rows).toEqual([{ member_id: member(2) }]);
    expect((await h.pool.query(`SELECT code FROM staff_link_codes`)).rows).toEqual([{ code: 'live-code' }]);
  });
});

describe("the scheduler's retention rounds", () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: MINUTE_MS, sender: { channels: ['EMAIL'] }, config: { retentionIntervalMs: 200 } });
    await h.scheduler.flows.create({ organizationId: ORG, name: 'email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
  });
  afterAll(async () => {
    await h.close();
  });

  it('run on their own: a recipient finished past the default 365 (fast-clock) days is anonymized', async () => {
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: '', externalId: '',
      recipients: [{ name: 'Vera Vintage', email: 'vera.vintage@example.com', phone: '', contactId: '', contactExternalId: '' }] });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'step sent' });
    await h.scheduler.cascades.cancel(ORG, result.id);
    await h.pool.query(`UPDATE recipients SET finished_at = now() - $2 * interval '1 millisecond' WHERE cascade_id = $1`, [result.id, 366 * DAY_MS]);
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].email === '', { what: 'anonymized by a round', timeoutMs: 10_000 });
    expect((await h.scheduler.cascades.get(ORG, result.id)).recipients[0]).toMatchObject({ name: '', email: '', status: 'finished' });
  });
});
