/**
 * A sender process for the kill test: consumes `steps.kill` from JetStream and sends each step to a
 * provider at PROVIDER_URL with the step id as its Idempotency-Key. The test SIGKILLs it mid-flight.
 */
import { connectJetStreamBus, createLogger } from '@rrs/runtime';
import { busV1 } from '@rrs/proto';
import { createPool, migrate } from '@rrs/runtime';
import { providerFetch, providerJson, SendLog, SENDER_KIT_MIGRATIONS_DIR, startSender } from '@rrs/sender-kit';

async function main() {
  const env = process.env as Record<string, string>;
  const logger = createLogger({ service: 'killable-sender', level: 'warn' });
  const bus = await connectJetStreamBus({ url: env.NATS_URL, prefix: env.BUS_PREFIX, name: 'killable-sender' });
  const pool = createPool({ url: env.DATABASE_URL, schema: 'kill_test' });
  await migrate(pool, { schema: 'kill_test', dir: SENDER_KIT_MIGRATIONS_DIR, component: 'sender-kit' });
  await startSender({
    bus,
    channel: 'KILL',
    sendLog: new SendLog(pool),
    logger,
    concurrency: 4,
    ackWaitMs: Number(env.ACK_WAIT_MS),
    baseBackoffMs: 100,
    maxBackoffMs: 500,
    send: async (step, ctx) => {
      const res = await providerFetch(env.PROVIDER_URL, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': ctx.idempotencyKey }, body: JSON.stringify({ to: step.recipient?.phone, resumed: ctx.resumed }) }, { provider: 'fake', timeoutMs: 60_000 });
      const body = await providerJson<{ id: string }>(res, 'fake');
      return { outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, providerMessageId: body.id };
    },
  });
  process.stdout.write('ready\n');
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
