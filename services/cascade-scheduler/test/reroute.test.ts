import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, startHarness, startScriptedSender, type Harness, type Outcome } from './harness';

/** No SMS balance → MAX → TELEGRAM (when the number is not on MAX); messenger unreachable → next phone channel. */
describe('reroutes of phone steps (Postgres + JetStream)', () => {
  let h: Harness;
  let sender: Awaited<ReturnType<typeof startScriptedSender>>;
  const script = new Map<string, Outcome>();

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40 });
    sender = await startScriptedSender(h.tb.bus, ['EMAIL', 'SMS', 'MAX', 'TELEGRAM'], (s) => script.get(`${s.recipient?.phone}|${s.channel}`) ?? 'STEP_OUTCOME_SENT');
  });
  afterAll(async () => {
    await sender.stop();
    await h.close();
  });

  async function runSms(phone: string, flowChannel = 'SMS') {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: flowChannel, externalId: '',
      recipients: [{ name: 'P', email: '', phone }],
    });
    return waitFor(async () => {
      const c = await h.scheduler.cascades.get(ORG, result.id);
      return c.status === 'finished' ? c.recipients[0] : undefined;
    }, { what: 'recipient finished' });
  }

  it('an SMS without balance goes to MAX, then to TELEGRAM when the number is not on MAX, and the reroute is recorded', async () => {
    const phone = '+79000001001';
    script.set(`${phone}|SMS`, 'STEP_OUTCOME_NO_BALANCE');
    script.set(`${phone}|MAX`, 'STEP_OUTCOME_UNREACHABLE');
    const r = await runSms(phone);
    expect(r.finishReason).toBe('exhausted');
    expect(r.steps[0]).toMatchObject({
      channel: 'SMS', sentChannel: 'TELEGRAM', status: 'sent',
      reroutes: [
        { fromChannel: 'SMS', toChannel: 'MAX', reason: 'no_balance' },
        { fromChannel: 'MAX', toChannel: 'TELEGRAM', reason: 'unreachable' },
      ],
    });
    const sent = sender.received.filter((s) => s.recipient?.phone === phone);
    expect(sent.map((s) => [s.channel, s.attempt])).toEqual([['SMS', 1], ['MAX', 2], ['TELEGRAM', 3]]);
    // Each attempt is its own message id, so the stream never drops a reroute as a duplicate.
    expect(new Set(sent.map((s) => s.attemptId)).size).toBe(3);
    // Each hop is its own send for the senders (their send logs are keyed by step id).
    expect(sent.map((s) => s.stepId)).toEqual([sent[0].stepId, `${sent[0].stepId}.MAX`, `${sent[0].stepId}.TELEGRAM`]);
  });

  it('stops at MAX when the number is on MAX', async () => {
    const phone = '+79000001002';
    script.set(`${phone}|SMS`, 'STEP_OUTCOME_NO_BALANCE');
    const r = await runSms(phone);
    expect(r.steps[0]).toMatchObject({ sentChannel: 'MAX', status: 'sent', reroutes: [{ fromChannel: 'SMS', toChannel: 'MAX', reason: 'no_balance' }] });
  });

  it('a MAX step whose number is not on MAX goes to the next phone channel (TELEGRAM)', async () => {
    const phone = '+79000001003';
    script.set(`${phone}|MAX`, 'STEP_OUTCOME_UNREACHABLE');
    const r = await runSms(phone, 'MAX');
    expect(r.steps[0]).toMatchObject({ channel: 'MAX', sentChannel: 'TELEGRAM', status: 'sent', reroutes: [{ fromChannel: 'MAX', toChannel: 'TELEGRAM', reason: 'unreachable' }] });
  });

  it('unreachable on every messenger fails the step and, with nothing sent, finishes the recipient unreachable', async () => {
    const phone = '+79000001004';
    script.set(`${phone}|SMS`, 'STEP_OUTCOME_NO_BALANCE');
    script.set(`${phone}|MAX`, 'STEP_OUTCOME_UNREACHABLE');
    script.set(`${phone}|TELEGRAM`, 'STEP_OUTCOME_UNREACHABLE');
    const r = await runSms(phone);
    expect(r.steps[0]).toMatchObject({ status: 'failed', reason: 'unreachable', sentChannel: 'TELEGRAM' });
    expect(r.finishReason).toBe('unreachable');
  });

  it('a reroute skips a messenger the organization has not configured', async () => {
    const phone = '+79000001005';
    script.set(`${phone}|SMS`, 'STEP_OUTCOME_NO_BALANCE');
    h.profiles.setConfigured(ORG, 'MAX', false);
    try {
      const r = await runSms(phone);
      expect(r.steps[0]).toMatchObject({
        sentChannel: 'TELEGRAM', status: 'sent',
        reroutes: [{ fromChannel: 'SMS', toChannel: 'MAX', reason: 'no_balance' }, { fromChannel: 'MAX', toChannel: 'TELEGRAM', reason: 'channel_not_configured' }],
      });
      expect(sender.received.filter((s) => s.recipient?.phone === phone).map((s) => s.channel)).toEqual(['SMS', 'TELEGRAM']);
    } finally {
      h.profiles.setConfigured(ORG, 'MAX', true);
    }
  });
});
