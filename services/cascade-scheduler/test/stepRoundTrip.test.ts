import { busV1 } from '@rrs/proto';
import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, recipientsInput, startHarness, type Harness } from './harness';

/** A cascade's step goes out over the bus to a sender, its result comes back, the recipient finishes and its event is relayed. */
describe.each(['memory', 'jetstream'] as const)('cascade round trip on the %s bus', (kind) => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ kind, sender: { channels: ['EMAIL'] }, collectEvents: true });
  });
  afterAll(async () => {
    await h.close();
  });

  it('dispatches the step with everything a sender needs, records SENT, finishes the recipient and relays the event', async () => {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'n', flowId: '', channel: 'EMAIL', externalId: 'order-1',
      recipients: recipientsInput(1, () => ({ name: 'Anna', email: 'anna@example.com' })),
    });
    expect(result).toMatchObject({ status: 'running', queued: 1, skipped: 0, channel: 'EMAIL' });
    await waitFor(() => h.sender.received.length === 1, { what: 'step delivered' });
    const step = h.sender.received[0];
    expect(step).toMatchObject({
      channel: 'EMAIL', organizationId: ORG, cascadeId: result.id, attempt: 1, locale: 'en',
      recipient: { name: 'Anna', email: 'anna@example.com', phone: '' },
      location: { id: LOCATION, name: 'Coffee on Tverskaya', address: 'Tverskaya 1', city: 'Moscow' },
      template: { subject: 'How was {{location}}?', body: 'Hi {{name}}, rate us: {{link}}' },
    });
    expect(step.attemptId).toBe(`${step.stepId}:1`);
    expect(step.reviewUrl).toMatch(/^http:\/\/reviews\.test\/r\/[0-9A-Za-z]{22}$/);
    expect(step.unsubscribeUrl).toBe(step.reviewUrl.replace('/r/', '/u/'));

    const cascade = await waitFor(async () => {
      const c = await h.scheduler.cascades.get(ORG, result.id);
      return c.status === 'finished' ? c : undefined;
    }, { what: 'cascade finished' });
    expect(cascade.recipients[0]).toMatchObject({ status: 'finished', finishReason: 'exhausted' });
    expect(cascade.recipients[0].steps[0]).toMatchObject({ status: 'sent', channel: 'EMAIL', sentChannel: 'EMAIL' });

    const event = await waitFor(() => h.events.events.find((e) => e.payload?.$case === 'cascadeRecipientFinished'), { what: 'finish event' });
    expect(event.type).toBe('cascade.recipient.finished');
    if (event.payload?.$case !== 'cascadeRecipientFinished') throw new Error('unexpected payload');
    expect(event.payload.cascadeRecipientFinished).toMatchObject({
      cascadeId: result.id, cascadeExternalId: 'order-1', reason: 'exhausted', rating: 0,
      recipient: { name: 'Anna', email: 'anna@example.com' },
      steps: [expect.objectContaining({ order: 1, channel: 'EMAIL', status: 'sent' })],
    });
    const { rows } = await h.pool.query('SELECT outcome FROM step_results WHERE step_id = $1', [step.stepId]);
    expect(rows).toEqual([{ outcome: busV1.stepOutcomeToJSON(busV1.StepOutcome.STEP_OUTCOME_SENT) }]);
  });
});
