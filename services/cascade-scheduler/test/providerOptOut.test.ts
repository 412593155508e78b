import { busV1 } from '@rrs/proto';
import { StepResultPublisher } from '@rrs/sender-kit';
import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, startHarness, type Harness } from './harness';

/**
 * A provider's opt-out report (a STOP reply, a spam complaint, a hard bounce) arrives as an OPTED_OUT
 * step result after the message went out: it feeds the opt-out ledger for every address of the person,
 * and the recipient finishes `unsubscribed` with its later steps canceled (fast clock, Postgres + JetStream).
 */
describe('provider opt-out results', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40, sender: { channels: ['EMAIL', 'SMS'] } });
  });
  afterAll(() => h.close());

  async function sentFirstStep(person: { email: string; phone: string }) {
    const flow = await h.scheduler.flows.create({ organizationId: ORG, name: `sms-then-email-${person.phone}`, isDefault: false, steps: [{ channel: 'SMS', delayMinutes: 0 }, { channel: 'EMAIL', delayMinutes: 600 }] });
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: flow.id, channel: '', externalId: '', recipients: [{ name: 'Rita', ...person }] });
    const step = await waitFor(() => h.sender.received.find((s) => s.cascadeId === result.id), { what: 'the SMS at the sender' });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'the SMS reported sent' });
    return { cascadeId: result.id, step };
  }

  it.each([
    ['stop_reply', 'stop_reply'],
    ['complaint', 'complaint'],
    ['hard_bounce', 'hard_bounce'],
    ['an unknown reason, recorded as a complaint', 'complaint'],
  ])('%s: every address of the person enters the ledger and the recipient finishes unsubscribed', async (reason, source) => {
    const suffix = String(Math.floor(Math.random() * 1e4)).padStart(4, '0');
    const person = { email: `rita${suffix}@example.com`, phone: `+7916555${suffix}` };
    const { cascadeId, step } = await sentFirstStep(person);
    const publisher = new StepResultPublisher(h.tb.bus);
    const reported = reason.startsWith('an unknown') ? 'carrier_said_so' : reason;
    await publisher.publish(
      { stepId: step.stepId, attemptId: step.attemptId, channel: 'SMS', organizationId: ORG },
      { outcome: busV1.StepOutcome.STEP_OUTCOME_OPTED_OUT, reason: reported },
    );
    const cascade = await waitFor(async () => {
      const current = await h.scheduler.cascades.get(ORG, cascadeId);
      return current.recipients[0].status === 'finished' ? current : undefined;
    }, { what: 'the recipient to finish' });
    expect(cascade.recipients[0].finishReason).toBe('unsubscribed');
    expect(cascade.recipients[0].steps.map((s) => s.status)).toEqual(['sent', 'canceled']);
    const { rows } = await h.pool.query('SELECT address, channel, source FROM suppressions WHERE address = ANY($1::text[]) ORDER BY address', [[person.email, person.phone]]);
    expect(rows).toEqual([
      { address: person.phone, channel: 'SMS', source },
      { address: person.email, channel: 'SMS', source },
    ]);
    // A redelivered report changes nothing (recorded once per attempt and outcome).
    await publisher.publish({ stepId: step.stepId, attemptId: step.attemptId, channel: 'SMS', organizationId: ORG }, { outcome: busV1.StepOutcome.STEP_OUTCOME_OPTED_OUT, reason: reported });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await h.pool.query('SELECT count(*)::int AS n FROM suppressions WHERE address = ANY($1::text[])', [[person.email, person.phone]])).rows[0].n).toBe(2);
  });

  it('a later request to the person is skipped as opted out', async () => {
    const suppressed = await h.pool.query<{ address: string }>(`SELECT address FROM suppressions WHERE address LIKE '+7916555%' LIMIT 1`);
    const again = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: 'SMS', externalId: '', recipients: [{ name: 'Rita', email: '', phone: suppressed.rows[0].address }] });
    expect(again.result).toMatchObject({ queued: 0, skipped: 1, status: 'finished' });
    const cascade = await h.scheduler.cascades.get(ORG, again.result.id);
    expect(cascade.recipients[0]).toMatchObject({ finishReason: 'unsubscribed', steps: [expect.objectContaining({ status: 'skipped', reason: 'opted_out' })] });
  });
});
