import type { Pool, PoolClient } from '@rrs/runtime';
import { inTransaction } from '@rrs/runtime';
import { waitFor } from '@rrs/testkit';
import { readCascade } from '../src/readCascade';
import { LOCATION, ORG, startHarness, type Harness } from './harness';

/**
 * GET /cascades/{id} shows one moment of the cascade: a recipient that finished never appears beside
 * steps that are still scheduled (the chaos and opt-out suites read `finished` and then the steps'
 * final statuses). The cascade, its recipients and their steps used to be read by separate statements
 * on separate connections, so a change committed between them showed half (CI saw a finished
 * `unsubscribed` recipient whose later step was still `scheduled`). The read is now one statement; a
 * read of several would meet the change between them here.
 */
describe('reading a cascade', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40, sender: { channels: ['EMAIL', 'SMS'] } });
  });
  afterAll(() => h.close());

  /**
   * The pool readCascade gets: its statements go to the real database, but the second statement that
   * reads recipients or steps waits until the first has answered and the recipient has meanwhile been
   * stopped by another transaction — the interleaving that showed half a change.
   */
  function interleavingPool(stopRecipient: () => Promise<void>): Pool {
    let firstRead: Promise<unknown> | undefined;
    let stopped: Promise<void> | undefined;
    const isRead = (config: unknown) => {
      const text = typeof config === 'string' ? config : (config as { text?: unknown } | undefined)?.text;
      return typeof text === 'string' && /FROM (recipients r|recipient_steps)\b/.test(text);
    };
    const intercept = <T extends { query: (...args: never[]) => unknown }>(target: T): T =>
      new Proxy(target, {
        get(object, key, receiver) {
          if (key !== 'query') return Reflect.get(object, key, receiver);
          return async (...args: unknown[]) => {
            if (!isRead(args[0])) return (object.query as (...a: unknown[]) => unknown).apply(object, args);
            if (!firstRead) {
              firstRead = (object.query as (...a: unknown[]) => Promise<unknown>).apply(object, args);
              return firstRead;
            }
            await firstRead.catch(() => undefined);
            stopped ??= stopRecipient();
            await stopped;
            return (object.query as (...a: unknown[]) => unknown).apply(object, args);
          };
        },
      });
    const pool = intercept(h.pool);
    return new Proxy(pool, {
      get(object, key, receiver) {
        if (key !== 'connect') return Reflect.get(object, key, receiver);
        return async () => intercept(await h.pool.connect() as PoolClient);
      },
    });
  }

  it('shows a recipient and its steps as of one moment, whatever commits while it reads', async () => {
    const flow = await h.scheduler.flows.create({ organizationId: ORG, name: 'sms-then-email-snapshot', isDefault: false, steps: [{ channel: 'SMS', delayMinutes: 0 }, { channel: 'EMAIL', delayMinutes: 600 }] });
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: flow.id, channel: '', externalId: '', recipients: [{ name: 'Rita', email: 'rita.snapshot@example.com', phone: '+79165550999' }] });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'the SMS reported sent' });
    const before = await readCascade(h.pool, ORG, result.id);
    expect(before.recipients[0].status).toBe('running');
    expect(before.recipients[0].steps.map((s) => s.status)).toEqual(['sent', 'scheduled']);

    // What the engine's stop() commits in one transaction: the recipient finishes, its pending steps are canceled.
    const stopRecipient = () => inTransaction(h.pool, async (client) => {
      await client.query(`UPDATE recipients SET status = 'finished', finish_reason = 'unsubscribed', finished_at = now() WHERE cascade_id = $1`, [result.id]);
      await client.query(`UPDATE recipient_steps SET status = 'canceled' WHERE cascade_id = $1 AND status = 'scheduled'`, [result.id]);
    });
    let stopping: Promise<void> | undefined;
    const stopOnce = () => (stopping ??= stopRecipient());
    const read = await readCascade(interleavingPool(stopOnce), ORG, result.id);

    const recipient = read.recipients[0];
    const seen = { status: recipient.status, steps: recipient.steps.map((s) => s.status) };
    expect([
      { status: 'running', steps: ['sent', 'scheduled'] },
      { status: 'finished', steps: ['sent', 'canceled'] },
    ]).toContainEqual(seen);
    // The change did commit (between the reads; or after it, when the read was one statement): a read after it sees all of it.
    await stopOnce();
    const after = await readCascade(h.pool, ORG, result.id);
    expect({ status: after.recipients[0].status, steps: after.recipients[0].steps.map((s) => s.status) }).toEqual({ status: 'finished', steps: ['sent', 'canceled'] });
  });
});
