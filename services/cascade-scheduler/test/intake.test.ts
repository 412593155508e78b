import type { eventsV1 } from '@rrs/proto';
import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, startHarness, type Harness } from './harness';

/**
 * Intake writes every row of a cascade in one statement, one array parameter per column: whatever a
 * CRM sends in a name is stored as sent, and every row of the cascade carries the cascade's time.
 */
describe('intake statement (Postgres)', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ deps: { noDispatcher: true }, collectEvents: true });
  });
  afterAll(async () => {
    await h.close();
  });

  it('stores names with quotes, commas, braces, backslashes, NULL and empty strings exactly as sent', async () => {
    const names = [`O'Brien, "Jr"`, '{a,b}', 'back\\slash', 'NULL', 'null', '', 'Анна Мария', 'tab\there'];
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'quoting, "all" {of} it', flowId: '', channel: 'EMAIL', externalId: 'NULL',
      recipients: names.map((name, i) => ({ name, email: `q${i}@example.com`, phone: '', contactId: i === 0 ? 'NULL' : '', contactExternalId: `ext "${i}"` })),
    });
    const cascade = await h.scheduler.cascades.get(ORG, result.id);
    expect(cascade).toMatchObject({ name: 'quoting, "all" {of} it', externalId: 'NULL', hasExternalId: true });
    expect(cascade.recipients.map((r) => r.name)).toEqual(names);
    expect(cascade.recipients.map((r) => r.contactExternalId)).toEqual(names.map((_, i) => `ext "${i}"`));
    const { rows } = await h.pool.query<{ contact_id: string; customer_name: string; contact: string }>(
      'SELECT r.contact_id, rr.customer_name, rr.contact FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1 ORDER BY r.position',
      [result.id],
    );
    expect(rows.map((r) => r.customer_name)).toEqual(names);
    expect(rows.map((r) => r.contact)).toEqual(names.map((_, i) => `q${i}@example.com`));
    expect(rows[0].contact_id).toBe('NULL');
  });

  it('gives the cascade, its review links, recipients and steps one time; only the first step of a reachable recipient is due', async () => {
    const flow = await h.scheduler.flows.create({ organizationId: ORG, name: 'three', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 5 }, { channel: 'EMAIL', delayMinutes: 10 }] });
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: flow.id, channel: '', externalId: '',
      recipients: [{ name: 'reachable', email: 'r@example.com', phone: '' }, { name: 'unreachable', email: '', phone: '' }],
    });
    expect(result).toMatchObject({ status: 'running', queued: 1, skipped: 1 });
    const { rows: times } = await h.pool.query<{ n: number }>(
      `SELECT count(DISTINCT t)::int AS n FROM (
         SELECT created_at AS t FROM cascades WHERE id = $1
         UNION ALL SELECT rr.created_at FROM review_requests rr JOIN recipients r ON r.review_request_id = rr.id WHERE r.cascade_id = $1
         UNION ALL SELECT finished_at FROM recipients WHERE cascade_id = $1 AND finished_at IS NOT NULL
         UNION ALL SELECT coalesce(due_at, skipped_at) FROM recipient_steps WHERE cascade_id = $1 AND coalesce(due_at, skipped_at) IS NOT NULL) times`,
      [result.id],
    );
    expect(times[0].n).toBe(1);
    const { rows: steps } = await h.pool.query<{ name: string; step_order: number; status: string; reason: string | null; sent_channel: string; due: boolean }>(
      `SELECT r.name, s.step_order, s.status, s.reason, s.sent_channel, s.due_at IS NOT NULL AS due
         FROM recipient_steps s JOIN recipients r ON r.id = s.recipient_id WHERE s.cascade_id = $1 ORDER BY r.position, s.step_order`,
      [result.id],
    );
    expect(steps).toEqual([
      { name: 'reachable', step_order: 1, status: 'scheduled', reason: null, sent_channel: 'EMAIL', due: true },
      { name: 'reachable', step_order: 2, status: 'pending', reason: null, sent_channel: 'SMS', due: false },
      { name: 'reachable', step_order: 3, status: 'pending', reason: null, sent_channel: 'EMAIL', due: false },
      { name: 'unreachable', step_order: 1, status: 'skipped', reason: 'no_contact', sent_channel: 'EMAIL', due: false },
      { name: 'unreachable', step_order: 2, status: 'skipped', reason: 'no_contact', sent_channel: 'SMS', due: false },
      { name: 'unreachable', step_order: 3, status: 'skipped', reason: 'no_contact', sent_channel: 'EMAIL', due: false },
    ]);
    const { rows: recipients } = await h.pool.query('SELECT name, status, finish_reason FROM recipients WHERE cascade_id = $1 ORDER BY position', [result.id]);
    expect(recipients).toEqual([{ name: 'reachable', status: 'running', finish_reason: null }, { name: 'unreachable', status: 'finished', finish_reason: 'unreachable' }]);
    // The skipped recipient's finish event names the ids its rows were written with (made apart, ids.ts).
    const { rows: ids } = await h.pool.query<{ id: string; review_request_id: string }>("SELECT id, review_request_id FROM recipients WHERE cascade_id = $1 AND name = 'unreachable'", [result.id]);
    const finished = await waitFor(() => h.events.events.find((e) => e.payload?.$case === 'cascadeRecipientFinished' && e.payload.cascadeRecipientFinished.cascadeId === result.id), { what: 'the finish event' });
    const event = (finished.payload as { cascadeRecipientFinished: eventsV1.CascadeRecipientFinished }).cascadeRecipientFinished;
    expect([event.recipient?.id, event.reviewRequestId]).toEqual([ids[0].id, ids[0].review_request_id]);
  });

  it("makes each recipient's review link (its contact the email, else the phone) and steps from its one row: positions, consent, an id per step", async () => {
    const flow = await h.scheduler.flows.create({ organizationId: ORG, name: 'two', isDefault: false, steps: [{ channel: 'SMS', delayMinutes: 0 }, { channel: 'EMAIL', delayMinutes: 30 }] });
    const consentAt = new Date('2026-11-01T10:00:00.000Z');
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: flow.id, channel: '', externalId: '',
      recipients: [
        { name: 'both', email: 'both@example.com', phone: '+79160000001', contactId: 'c-1', contactExternalId: 'crm-1', consentAt },
        { name: 'phone only', email: '', phone: '+79160000002' },
        { name: 'email only', email: 'mail@example.com', phone: '' },
      ],
    });
    const { rows } = await h.pool.query<{ position: number; name: string; contact_id: string; consent_at: Date | null; customer_name: string; contact: string; location_id: string; linked: boolean }>(
      `SELECT r.position, r.name, r.contact_id, r.consent_at, rr.customer_name, rr.contact, rr.location_id, rr.recipient_id = r.id AS linked
         FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1 ORDER BY r.position`,
      [result.id],
    );
    expect(rows).toEqual([
      { position: 0, name: 'both', contact_id: 'c-1', consent_at: consentAt, customer_name: 'both', contact: 'both@example.com', location_id: LOCATION, linked: true },
      { position: 1, name: 'phone only', contact_id: '', consent_at: null, customer_name: 'phone only', contact: '+79160000002', location_id: LOCATION, linked: true },
      { position: 2, name: 'email only', contact_id: '', consent_at: null, customer_name: 'email only', contact: 'mail@example.com', location_id: LOCATION, linked: true },
    ]);
    const { rows: steps } = await h.pool.query<{ id: string; name: string; step_order: number; channel: string; delay_minutes: number; status: string }>(
      `SELECT s.id, r.name, s.step_order, s.channel, s.delay_minutes, s.status
         FROM recipient_steps s JOIN recipients r ON r.id = s.recipient_id WHERE s.cascade_id = $1 ORDER BY r.position, s.step_order`,
      [result.id],
    );
    expect(steps.map(({ id: _id, ...step }) => step)).toEqual([
      { name: 'both', step_order: 1, channel: 'SMS', delay_minutes: 0, status: 'scheduled' },
      { name: 'both', step_order: 2, channel: 'EMAIL', delay_minutes: 30, status: 'pending' },
      { name: 'phone only', step_order: 1, channel: 'SMS', delay_minutes: 0, status: 'scheduled' },
      { name: 'phone only', step_order: 2, channel: 'EMAIL', delay_minutes: 30, status: 'pending' },
      { name: 'email only', step_order: 1, channel: 'SMS', delay_minutes: 0, status: 'scheduled' },
      { name: 'email only', step_order: 2, channel: 'EMAIL', delay_minutes: 30, status: 'pending' },
    ]);
    expect(new Set(steps.map((step) => step.id)).size).toBe(6);
  });

  it('stores a value every recipient shares (sent once for all of them) on each, for one recipient and for many', async () => {
    const consentAt = new Date('2026-11-02T08:30:00.123Z');
    const shared = { email: '', phone: '', contactId: 'c-same', contactExternalId: 'crm-same', consentAt };
    const read = async (id: string) =>
      (await h.pool.query('SELECT position, name, status, finish_reason, contact_id, contact_external_id, consent_at FROM recipients WHERE cascade_id = $1 ORDER BY position', [id])).rows;
    const start = (recipients: Array<typeof shared & { name: string }>) =>
      h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: 'EMAIL', externalId: '', recipients });
    const row = (position: number, name: string) => ({ position, name, status: 'finished', finish_reason: 'unreachable', contact_id: 'c-same', contact_external_id: 'crm-same', consent_at: consentAt });
    const many = await start([{ name: 'a', ...shared }, { name: 'b', ...shared }, { name: 'c', ...shared }]);
    expect(await read(many.result.id)).toEqual([row(0, 'a'), row(1, 'b'), row(2, 'c')]);
    const one = await start([{ name: 'only', ...shared }]);
    expect(await read(one.result.id)).toEqual([row(0, 'only')]);
    const { rows: steps } = await h.pool.query('SELECT DISTINCT status, reason FROM recipient_steps WHERE cascade_id = ANY($1::uuid[])', [[many.result.id, one.result.id]]);
    expect(steps).toEqual([{ status: 'skipped', reason: 'no_contact' }]);
  });
});
