import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, startHarness, type Harness } from './harness';

/**
 * The timing and skip rules of the design brief §3, with the fast clock (one flow minute = 40 ms) on
 * real PostgreSQL and NATS JetStream.
 */
const MINUTE = 40;

describe('timing and skip rules (fast clock, Postgres + JetStream)', () => {
  let h: Harness;
  const failFor = new Set<string>();

  beforeAll(async () => {
    h = await startHarness({ minuteMs: MINUTE, sender: { channels: ['EMAIL', 'SMS', 'MAX', 'TELEGRAM'], decide: (s) => (failFor.has(`${s.recipient?.email}|${s.channel}`) ? 'STEP_OUTCOME_FAILED' : 'STEP_OUTCOME_SENT') }, collectEvents: true });
  });
  afterAll(async () => {
    await h.close();
  });

  async function flow(steps: Array<[string, number]>): Promise<string> {
    const f = await h.scheduler.flows.create({ organizationId: ORG, name: `f${Math.random()}`, isDefault: false, steps: steps.map(([channel, delayMinutes]) => ({ channel, delayMinutes })) });
    return f.id;
  }

  async function run(flowId: string, recipient: { name?: string; email?: string; phone?: string }) {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId, channel: '', externalId: '',
      recipients: [{ name: recipient.name ?? 'X', email: recipient.email ?? '', phone: recipient.phone ?? '' }],
    });
    const cascade = await waitFor(async () => {
      const c = await h.scheduler.cascades.get(ORG, result.id);
      return c.status === 'finished' ? c : undefined;
    }, { what: 'cascade finished', timeoutMs: 8_000 });
    const { rows } = await h.pool.query(
      `SELECT s.step_order, s.status, s.reason, s.due_at, s.dispatched_at, s.sent_at, r.created_at
         FROM recipient_steps s JOIN cascades r ON r.id = s.cascade_id WHERE s.cascade_id = $1 ORDER BY s.step_order`,
      [result.id],
    );
    return { result, cascade, recipient: cascade.recipients[0], steps: rows as Array<{ step_order: number; status: string; reason: string | null; due_at: Date | null; dispatched_at: Date | null; sent_at: Date | null; created_at: Date }> };
  }

  const ms = (a: Date | null, b: Date | null) => (a as Date).getTime() - (b as Date).getTime();

  it('step 1 is due at once whatever its delay; step k>1 is due delayMinutes after the last step actually sent', async () => {
    const id = await flow([['EMAIL', 30], ['SMS', 5], ['EMAIL', 10]]);
    const { steps, recipient } = await run(id, { email: 'a1@example.com', phone: '+79000000001' });
    expect(steps.map((s) => s.status)).toEqual(['sent', 'sent', 'sent']);
    expect(ms(steps[0].due_at, steps[0].created_at)).toBeLessThan(MINUTE);
    expect(ms(steps[1].due_at, steps[0].sent_at)).toBe(5 * MINUTE);
    expect(ms(steps[2].due_at, steps[1].sent_at)).toBe(10 * MINUTE);
    for (const s of steps) expect(ms(s.dispatched_at, s.due_at)).toBeGreaterThanOrEqual(0);
    expect(recipient).toMatchObject({ status: 'finished', finishReason: 'exhausted' });
  });

  it('a skipped step takes no time: with nothing sent yet, the next step that can reach the recipient goes at once', async () => {
    const id = await flow([['EMAIL', 0], ['SMS', 20]]);
    const { steps, recipient } = await run(id, { phone: '+79000000002' });
    expect(steps[0]).toMatchObject({ status: 'skipped', reason: 'no_contact' });
    expect(steps[1].status).toBe('sent');
    // Due at the skip, not 20 flow minutes later (half the delay leaves room for a loaded machine's
    // processing of the skip, and still tells the two apart).
    expect(ms(steps[1].due_at, steps[0].due_at)).toBeLessThan(10 * MINUTE);
    expect(recipient.finishReason).toBe('exhausted');
  });

  it('after something was sent, a skipped step leaves the next one due delayMinutes after the last sent step', async () => {
    const id = await flow([['EMAIL', 0], ['SMS', 3], ['EMAIL', 6]]);
    const { steps } = await run(id, { email: 'a3@example.com' });
    expect(steps.map((s) => [s.status, s.reason])).toEqual([['sent', null], ['skipped', 'no_contact'], ['sent', null]]);
    expect(ms(steps[2].due_at, steps[0].sent_at)).toBe(6 * MINUTE);
  });

  it('a failed step records its reason and the next step follows, timed from the last sent step (at once when none)', async () => {
    failFor.add('a4@example.com|EMAIL');
    const id = await flow([['EMAIL', 0], ['SMS', 15]]);
    const { steps, recipient } = await run(id, { email: 'a4@example.com', phone: '+79000000004' });
    expect(steps[0]).toMatchObject({ status: 'failed', reason: 'provider_rejected' });
    expect(steps[1].status).toBe('sent');
    expect(ms(steps[1].due_at, steps[0].dispatched_at)).toBeLessThan(MINUTE * 5);
    expect(recipient.finishReason).toBe('exhausted');
  });

  it('a channel not configured for the organization is skipped when the step fires, with the reason', async () => {
    const id = await flow([['EMAIL', 0], ['SMS', 0]]);
    h.profiles.setConfigured(ORG, 'SMS', false);
    try {
      const { steps } = await run(id, { email: 'a5@example.com', phone: '+79000000005' });
      expect(steps[1]).toMatchObject({ status: 'skipped', reason: 'channel_not_configured' });
    } finally {
      h.profiles.setConfigured(ORG, 'SMS', true);
    }
  });

  it('an opted-out address is skipped with reason opted_out; a recipient with every step skipped that way finishes unsubscribed', async () => {
    await h.pool.query(`INSERT INTO suppressions (organization_id, channel, address, source) VALUES ($1, 'EMAIL', 'a6@example.com', 'unsubscribe_page')`, [ORG]);
    const id = await flow([['EMAIL', 0]]);
    const { steps, recipient } = await run(id, { email: 'A6@example.com' });
    expect(steps[0]).toMatchObject({ status: 'skipped', reason: 'opted_out' });
    expect(recipient.finishReason).toBe('unsubscribed');
    expect(h.sender.received.some((s) => s.recipient?.email === 'A6@example.com')).toBe(false);
  });

  it('a recipient with no contact for any step is counted in skipped, finishes unreachable and gets its event', async () => {
    const id = await flow([['EMAIL', 0], ['SMS', 5]]);
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: id, channel: '', externalId: 'x7',
      recipients: [{ name: 'Nobody', email: '', phone: '' }, { name: 'Somebody', email: 'a7@example.com', phone: '' }],
    });
    expect(result).toMatchObject({ queued: 1, skipped: 1, status: 'running' });
    const cascade = await waitFor(async () => {
      const c = await h.scheduler.cascades.get(ORG, result.id);
      return c.status === 'finished' ? c : undefined;
    }, { what: 'cascade finished' });
    expect(cascade.recipients.map((r) => r.finishReason)).toEqual(['unreachable', 'exhausted']);
    expect(cascade.recipients[0].steps.map((s) => [s.status, s.reason])).toEqual([['skipped', 'no_contact'], ['skipped', 'no_contact']]);
    const counts = Object.fromEntries(cascade.counts.map((c) => [c.key, c.value]));
    expect(counts).toMatchObject({ recipients: 2, queued: 1, skipped: 1, finished: 2, running: 0, unreachable: 1, exhausted: 1, stepsSent: 1 });
    const ev = await waitFor(() => h.events.events.find((e) => e.payload?.$case === 'cascadeRecipientFinished' && e.payload.cascadeRecipientFinished.recipient?.name === 'Nobody'), { what: 'unreachable event' });
    expect(ev.payload?.$case === 'cascadeRecipientFinished' && ev.payload.cascadeRecipientFinished.reason).toBe('unreachable');
  });

  it('a cascade whose every recipient is skipped is finished at once', async () => {
    const id = await flow([['SMS', 0]]);
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: id, channel: '', externalId: '',
      recipients: [{ name: 'Mail only', email: 'a8@example.com', phone: '' }],
    });
    expect(result).toMatchObject({ status: 'finished', queued: 0, skipped: 1 });
  });
});
