import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, startHarness, type Harness } from './harness';

/** The finish event goes through the outbox: written with the finish, relayed once however often the row is relayed. */
describe('finish event outbox (Postgres + JetStream)', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40, sender: { channels: ['EMAIL'] }, collectEvents: true });
  });
  afterAll(async () => {
    await h.close();
  });

  it('writes one outbox row per finished recipient, relays it with its event id as message id, and a second relay of the row is dropped', async () => {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: 'EMAIL', externalId: 'ob-1',
      recipients: [{ name: 'A', email: 'ob1@example.com', phone: '' }, { name: 'B', email: 'ob2@example.com', phone: '' }],
    });
    await waitFor(async () => (await h.pool.query(`SELECT count(*)::int AS n FROM outbox WHERE published_at IS NOT NULL`)).rows[0].n === 2, { what: 'two events relayed' });
    await waitFor(() => h.events.events.length === 2, { what: 'two events consumed' });
    const { rows } = await h.pool.query<{ msg_id: string }>('SELECT msg_id FROM outbox ORDER BY id');
    expect(h.events.events.map((e) => e.id).sort()).toEqual(rows.map((r) => r.msg_id).sort());
    for (const e of h.events.events) expect(e.payload?.$case === 'cascadeRecipientFinished' && e.payload.cascadeRecipientFinished.cascadeId).toBe(result.id);

    // A relay that crashed after publishing and before marking the rows: the rows go out again.
    await h.pool.query('UPDATE outbox SET published_at = NULL');
    await h.pool.query(`SELECT pg_notify('rrs_scheduler_outbox', '')`);
    await waitFor(async () => (await h.pool.query(`SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL`)).rows[0].n === 0, { what: 'rows relayed again' });
    // Anything relayed after them is consumed after them: one more finish proves the repeats were dropped.
    await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: 'EMAIL', externalId: 'ob-2', recipients: [{ name: 'C', email: 'ob3@example.com', phone: '' }] });
    await waitFor(() => h.events.events.length >= 3, { what: 'third event' });
    await new Promise((r) => setTimeout(r, 200));
    expect(h.events.events).toHaveLength(3);
  });
});
