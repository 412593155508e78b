import { startMessengerSender } from '@rrs/channel-messenger';
import { SinkOutbox } from '@rrs/sender-kit';
import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, startHarness, type Harness } from './harness';

/**
 * With the real messenger sender (one service, one send log for MAX and TELEGRAM): a MAX step whose
 * number is not on MAX reaches the customer on TELEGRAM. Each reroute hop is its own send for the
 * sender (step id `<step>.<CHANNEL>`), so the MAX outcome recorded in the send log is not replayed for
 * the TELEGRAM hop.
 */
describe('reroute MAX → TELEGRAM through the real messenger sender', () => {
  let h: Harness;
  const outbox = new SinkOutbox();
  const maxCalls: string[] = [];

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40, kind: 'memory' });
    await startMessengerSender({ busPrefix: h.tb.prefix, databaseUrl: h.db.url, concurrency: 4 }, h.ctx, {
      bus: h.tb.bus,
      outbox,
      providers: {
        MAX: {
          name: 'not-on-max',
          async send(request) {
            maxCalls.push(request.stepId);
            return { kind: 'not_registered' };
          },
        },
      },
    });
  });
  afterAll(async () => {
    await h.close();
  });

  it('sends on TELEGRAM after MAX answers not registered', async () => {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: 'MAX', externalId: '',
      recipients: [{ name: 'Pavel', email: '', phone: '+79161234567' }],
    });
    const r = await waitFor(async () => {
      const c = await h.scheduler.cascades.get(ORG, result.id);
      return c.status === 'finished' ? c.recipients[0] : undefined;
    }, { what: 'recipient finished' });
    expect(r.steps[0]).toMatchObject({ status: 'sent', sentChannel: 'TELEGRAM', reroutes: [{ fromChannel: 'MAX', toChannel: 'TELEGRAM', reason: 'unreachable' }] });
    expect(r.finishReason).toBe('exhausted');
    expect(maxCalls).toHaveLength(1);
    const telegram = outbox.list().filter((m) => m.channel === 'TELEGRAM');
    expect(telegram).toHaveLength(1);
    expect(telegram[0].stepId).toBe(`${maxCalls[0]}.TELEGRAM`);
  });
});
