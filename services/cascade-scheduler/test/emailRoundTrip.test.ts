import { startEmailSender } from '@rrs/channel-email';
import { SinkOutbox } from '@rrs/sender-kit';
import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, startHarness, type Harness } from './harness';

/** A cascade step rendered and "sent" by the real email sender (sink provider), with its links. */
describe('cascade → real email sender', () => {
  let h: Harness;
  const outbox = new SinkOutbox();

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40, kind: 'memory' });
    await startEmailSender({ busPrefix: h.tb.prefix, databaseUrl: h.db.url, concurrency: 4 }, h.ctx, { bus: h.tb.bus, outbox });
  });
  afterAll(async () => {
    await h.close();
  });

  it('the email carries the location, the name and the personal review link; the step is recorded sent', async () => {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: 'EMAIL', externalId: '',
      recipients: [{ name: 'Anna', email: 'anna@example.com', phone: '' }],
    });
    const c = await waitFor(async () => {
      const x = await h.scheduler.cascades.get(ORG, result.id);
      return x.status === 'finished' ? x : undefined;
    }, { what: 'cascade finished' });
    expect(c.recipients[0].steps[0].status).toBe('sent');
    const { rows } = await h.pool.query('SELECT rr.token FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    const mails = outbox.list().filter((m) => m.channel === 'EMAIL');
    expect(mails).toHaveLength(1);
    expect(mails[0]).toMatchObject({ to: 'anna@example.com', subject: 'How was Coffee on Tverskaya?' });
    expect(JSON.stringify(mails[0])).toContain(`http://reviews.test/r/${rows[0].token}`);
    expect(JSON.stringify(mails[0])).toContain('Anna');
  });
});
