import { connect } from 'nats';
import { startNatsCluster, uniqueName, waitFor, type NatsCluster } from '@rrs/testkit';
import { connectJetStreamBus, type Bus, type StreamDrift } from '../src/bus';
import { readEnv, busEnvShape, busConfig } from '../src/config';

/**
 * The bus on a three-node JetStream cluster the test starts on private ports: streams created with the
 * configured replica count, an existing stream's replicas never rewritten by a service start, and
 * several servers in NATS_URL so a service starts while one node is down.
 */

let cluster: NatsCluster;
const buses: Bus[] = [];

beforeAll(async () => {
  cluster = await startNatsCluster();
}, 60_000);

afterAll(async () => {
  for (const bus of buses) await bus.close().catch(() => undefined);
  await cluster?.remove();
});

async function open(prefix: string, options: { streamReplicas?: number; url?: string; drift?: StreamDrift[] } = {}): Promise<Bus> {
  const bus = await connectJetStreamBus({
    url: options.url ?? cluster.url,
    prefix,
    name: `test-${prefix}`,
    streamReplicas: options.streamReplicas,
    onStreamDrift: (d) => options.drift?.push(d),
  });
  buses.push(bus);
  return bus;
}

async function replicasOf(stream: string): Promise<{ replicas: number; leader?: string }> {
  const nc = await connect({ servers: cluster.urls });
  try {
    const info = await (await nc.jetstreamManager()).streams.info(stream);
    return { replicas: info.config.num_replicas, leader: info.cluster?.leader };
  } finally {
    await nc.close();
  }
}

test('BUS_STREAM_REPLICAS: streams and the bucket are created R3; a later start with 1 leaves them R3 and reports the difference', async () => {
  const prefix = uniqueName('r');
  const first = await open(prefix, { streamReplicas: 3 });
  await first.ensureStreams();
  await first.kv('channels', { ttlMs: 30_000 });
  const upper = prefix.toUpperCase();
  for (const stream of ['STEPS', 'EVENTS', 'RATINGS']) expect((await replicasOf(`${upper}_${stream}`)).replicas).toBe(3);
  expect((await replicasOf(`KV_${prefix}_channels`)).replicas).toBe(3);

  // A consumer made by the R3 start inherits the stream's replicas (durable, not ephemeral).
  const sub = await first.consume({ stream: 'STEPS', durable: 'email', filterSubject: 'steps.email' }, async (m) => m.ack());
  await sub.drain();

  const drift: StreamDrift[] = [];
  const second = await open(prefix, { streamReplicas: 1, drift });
  await second.ensureStreams();
  await second.kv('channels', { ttlMs: 30_000 });
  const again = await second.consume({ stream: 'STEPS', durable: 'email', filterSubject: 'steps.email' }, async (m) => m.ack());
  await again.drain();

  for (const stream of ['STEPS', 'EVENTS', 'RATINGS']) expect((await replicasOf(`${upper}_${stream}`)).replicas).toBe(3);
  expect((await replicasOf(`KV_${prefix}_channels`)).replicas).toBe(3);
  expect(drift.map((d) => `${d.stream}:${d.setting}:${d.existing}->${d.configured}`).sort()).toEqual(
    [`${upper}_EVENTS:num_replicas:3->1`, `${upper}_RATINGS:num_replicas:3->1`, `${upper}_STEPS:num_replicas:3->1`].sort(),
  );
  const nc = await connect({ servers: cluster.urls });
  try {
    const consumer = await (await nc.jetstreamManager()).consumers.info(`${upper}_STEPS`, 'email');
    expect(consumer.config.durable_name).toBe('email');
    expect(consumer.cluster?.replicas?.length).toBe(2);
  } finally {
    await nc.close();
  }
}, 60_000);

test('a limit changed on a running system (duplicate window) is left as the operator set it, and reported', async () => {
  const prefix = uniqueName('d');
  const upper = prefix.toUpperCase();
  const first = await open(prefix, { streamReplicas: 3 });
  await first.ensureStreams();
  const nc = await connect({ servers: cluster.urls });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.update(`${upper}_STEPS`, { duplicate_window: 60_000_000_000 });
    const drift: StreamDrift[] = [];
    await (await open(prefix, { streamReplicas: 3, drift })).ensureStreams();
    expect(drift).toEqual([{ stream: `${upper}_STEPS`, setting: 'duplicate_window', existing: '60000000000', configured: '120000000000' }]);
    expect((await jsm.streams.info(`${upper}_STEPS`)).config.duplicate_window).toBe(60_000_000_000);
  } finally {
    await nc.close();
  }
}, 60_000);

test('NATS_URL with the three servers: config accepts it, and a service starts and publishes while one node is down', async () => {
  const vars = readEnv(busEnvShape, { NATS_URL: cluster.urls.join(', '), BUS_STREAM_REPLICAS: '3' });
  expect(busConfig(vars)).toEqual({ natsUrl: cluster.urls.join(', '), busPrefix: '', streamReplicas: 3 });

  const prefix = uniqueName('n');
  await (await open(prefix, { streamReplicas: 3 })).ensureStreams();
  await cluster.kill(0);
  try {
    // The first server listed is the one that is down.
    const bus = await open(prefix, { streamReplicas: 3, url: vars.NATS_URL });
    await bus.ensureStreams();
    const got: string[] = [];
    await bus.consume({ stream: 'STEPS', durable: 'sms', filterSubject: 'steps.sms' }, async (m) => {
      got.push(new TextDecoder().decode(m.data));
      m.ack();
    });
    // Right after a node loss the stream may be electing a new leader; the publish retries until it has one.
    await waitFor(() => bus.publish('steps.sms', new TextEncoder().encode('hello'), { msgId: 'one' }).then(() => true), { timeoutMs: 20_000, what: 'publish with a node down' });
    await waitFor(() => got.length === 1, { timeoutMs: 20_000, what: 'delivery with a node down' });
    expect(got).toEqual(['hello']);
  } finally {
    await cluster.start(0);
  }
}, 90_000);
