#!/usr/bin/env node
// Child process of the cascade benchmarks: contacts + cascade-scheduler + gateway (built dist/, loopback
// only) on the given database, with a seeded organization. Reports {base, key, locationId, flowId} over IPC.
// Env: DATABASE_URL, BENCH_DISPATCHER=0|1, BENCH_NATS_URL (unset = in-process bus), BENCH_PREFIX.
// IPC: 'stop'; { profile: 'start', heap? } and { profile: 'stop', heap?, file } take a CPU profile (or,
// with `heap`, a sampled allocation profile) of this process over the phase the parent measures
// (answered { profiled: file } once written).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { createServiceContext, createMemoryBus, connectJetStreamBus } = require('@rrs/runtime');
const { startContacts } = require('@rrs/contacts');
const { startScheduler } = require('@rrs/cascade-scheduler');
const { startGateway } = require('@rrs/gateway');
// Budgets the run cannot use up: the scheduler takes them with every start but never refuses (RECIPIENT_QUOTA_* in a deployment).
const BENCH_RECIPIENT_QUOTAS = { trial: { perMinute: 1, perDay: 1 }, standard: { perMinute: 1e9, perDay: 1e12 }, pro: { perMinute: 1e9, perDay: 1e12 } };

const databaseUrl = process.env.DATABASE_URL;
const ctx = createServiceContext('bench', 'warn');
const bus = process.env.BENCH_NATS_URL
  ? await connectJetStreamBus({ url: process.env.BENCH_NATS_URL, prefix: process.env.BENCH_PREFIX, name: 'bench' })
  : createMemoryBus();
await bus.ensureStreams();
const contacts = await startContacts({ databaseUrl, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
const scheduler = await startScheduler(
  { databaseUrl, busPrefix: process.env.BENCH_PREFIX ?? '', grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://127.0.0.1', recipientQuotas: BENCH_RECIPIENT_QUOTAS,
    // A bench that rolls the overview up itself (history.mjs) keeps the scheduler's own rounds out of its way.
    overviewRollupIntervalMs: Number(process.env.BENCH_OVERVIEW_ROLLUP_INTERVAL_MS) || undefined },
  ctx,
  { bus, noDispatcher: process.env.BENCH_DISPATCHER !== '1' },
);
const gateway = await startGateway({ host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, publicBaseUrl: 'http://127.0.0.1', rateLimits: { windowSeconds: 60, perPlan: { trial: 1, standard: 1_000_000, pro: 1_000_000 } } }, ctx);
ctx.health.setReady(true);
const org = await contacts.directory.createOrganization({ name: 'Bench', plan: 'pro', emailConfirmed: true, locale: 'en', defaultRegion: 'RU', sendWindow: null });
for (const channel of ['EMAIL', 'SMS', 'MAX', 'TELEGRAM']) await contacts.channels.set({ organizationId: org.id, channel, configured: true });
const key = (await contacts.directory.issueApiKey({ organizationId: org.id })).secret;
const location = await contacts.directory.createLocation({ organizationId: org.id, name: 'Bench cafe', address: 'a', city: 'c', timeZone: 'UTC', reviewLinks: [] });
const flow = await scheduler.flows.create({ organizationId: org.id, name: 'Three steps', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 60 }, { channel: 'EMAIL', delayMinutes: 1440 }] });
process.send({ base: gateway.url, key, organizationId: org.id, locationId: location.id, flowId: flow.id, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}` });
let profiler = null;
process.on('message', async (m) => {
  if (m?.profile === 'start') {
    const { Session } = await import('node:inspector/promises');
    profiler = new Session();
    profiler.connect();
    if (m.heap) {
      // Allocations, sampled, including objects the GC has collected since: what the phase allocates.
      await profiler.post('HeapProfiler.enable');
      await profiler.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    } else {
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.start');
    }
    process.send({ profiling: true });
  } else if (m?.profile === 'stop') {
    const { profile } = await profiler.post(m.heap ? 'HeapProfiler.stopSampling' : 'Profiler.stop');
    (await import('node:fs')).writeFileSync(m.file, JSON.stringify(profile));
    profiler.disconnect();
    process.send({ profiled: m.file });
  } else if (m === 'stop') {
    await ctx.lifecycle.shutdown('bench done');
    await bus.close();
    process.exit(0);
  }
});
