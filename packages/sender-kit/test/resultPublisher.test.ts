import { busV1, STEP_RESULT_BATCH_SUBJECT } from '@rrs/proto';
import { BusError, type Bus, type PublishAck, type PublishOptions } from '@rrs/runtime';
import { createTestBus, waitFor, type TestBus } from '@rrs/testkit';
import { StepResultPublisher } from '../src';
import { dueStep } from './support/steps';

const Outcome = busV1.StepOutcome;

/** Every batch message published, decoded, in the order the stream delivered them. */
async function collectBatches(bus: Bus): Promise<{ batches: busV1.StepResult[][]; stop(): Promise<void> }> {
  const batches: busV1.StepResult[][] = [];
  const sub = await bus.consume({ stream: 'STEPS', durable: 'test-result-batches', filterSubject: STEP_RESULT_BATCH_SUBJECT }, async (msg) => {
    batches.push(busV1.StepResultBatch.decode(msg.data).results);
    msg.ack();
  });
  return { batches, stop: () => sub.drain() };
}

describe.each(['memory', 'jetstream'] as const)('StepResultPublisher on the %s bus', (kind) => {
  let tb: TestBus;
  let collected: Awaited<ReturnType<typeof collectBatches>>;

  beforeAll(async () => {
    tb = await createTestBus(kind);
    await tb.bus.ensureStreams();
    collected = await collectBatches(tb.bus);
  });
  afterAll(async () => {
    await collected.stop();
    await tb.cleanup();
  });

  it('sends the results reported together as one message, each with its fields, and resolves once it is stored', async () => {
    const results = new StepResultPublisher(tb.bus);
    const steps = Array.from({ length: 25 }, () => dueStep('EMAIL'));
    const before = collected.batches.length;
    await Promise.all(steps.map((s, i) => results.publish(s, { outcome: i === 0 ? Outcome.STEP_OUTCOME_FAILED : Outcome.STEP_OUTCOME_SENT, reason: i === 0 ? 'provider_rejected' : undefined, providerMessageId: `p-${i}`, parts: 1 })));
    await waitFor(() => collected.batches.length > before, { what: 'the batch delivered' });
    const batch = collected.batches[before];
    expect(collected.batches.slice(before)).toHaveLength(1);
    expect(batch.map((r) => r.attemptId)).toEqual(steps.map((s) => s.attemptId));
    expect(batch[0]).toMatchObject({ stepId: steps[0].stepId, channel: 'EMAIL', outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'provider_rejected', providerMessageId: 'p-0', parts: 1, organizationId: 'org-1' });
    expect(batch[1]).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT, reason: '', providerMessageId: 'p-1' });
  });

  it('never puts more than maxBatch results in one message', async () => {
    const results = new StepResultPublisher(tb.bus, 10);
    const before = collected.batches.length;
    await Promise.all(Array.from({ length: 25 }, () => results.publish(dueStep('SMS'), { outcome: Outcome.STEP_OUTCOME_SENT })));
    await waitFor(() => collected.batches.slice(before).flat().length === 25, { what: 'all 25 results delivered' });
    expect(collected.batches.slice(before).map((b) => b.length)).toEqual([10, 10, 5]);
  });

  it('rejects every result of a batch the bus refused, so the sender naks their steps', async () => {
    const refusing = new Proxy(tb.bus, {
      get(target, prop, receiver) {
        if (prop !== 'publish') return Reflect.get(target, prop, receiver);
        return async (_subject: string, _data: Uint8Array, _options?: PublishOptions): Promise<PublishAck> => {
          throw new BusError('publish refused');
        };
      },
    }) as Bus;
    const results = new StepResultPublisher(refusing);
    const outcomes = await Promise.allSettled([1, 2, 3].map(() => results.publish(dueStep('EMAIL'), { outcome: Outcome.STEP_OUTCOME_SENT })));
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
  });
});
