import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SpanKind as ApiSpanKind, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createTestBus, waitFor, type TestBus } from '@rrs/testkit';
import { observeBus, registry, startTracing, tracingEnabled, withSpan, type Bus, type Tracing } from '../src';

const enc = new TextEncoder();

async function lagOf(consumer: string): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('bus_consumer_pending_messages')?.get();
  return metric?.values.find((v) => v.labels.consumer === consumer)?.value;
}

describe('startTracing', () => {
  it('stays off without OTEL_EXPORTER_OTLP_ENDPOINT', () => {
    expect(tracingEnabled({})).toBe(false);
  });

  it('starts once per process: a second start returns the running SDK', () => {
    expect(tracing).not.toBeNull();
    expect(startTracing({ serviceName: 'other', env: {} })).toBe(tracing);
  });

  it('is on when an OTLP endpoint is configured', () => {
    expect(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingEnabled({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
  });
});

// One tracer provider per process, as in a service.
const exporter = new InMemorySpanExporter();
let tracing: Tracing | null;
beforeAll(() => {
  tracing = startTracing({ serviceName: 'test', spanProcessors: [new SimpleSpanProcessor(exporter)] });
});
afterAll(() => tracing?.shutdown());

describe('incoming HTTP requests', () => {
  it('get a SERVER span continuing the caller\'s traceparent, active while the handler runs; ops paths get none', async () => {
    // Created after startTracing, from the `http` module loaded before it (as in a service's main.ts).
    const seen: Array<string | undefined> = [];
    const server = http.createServer((req, res) => {
      seen.push(trace.getActiveSpan()?.spanContext().traceId);
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    try {
      exporter.reset();
      const caller = '4bf92f3577b34da6a3ce929d0e0e4736';
      await fetch(`http://127.0.0.1:${port}/api/v1/ping`, { headers: { traceparent: `00-${caller}-00f067aa0ba902b7-01` } });
      await fetch(`http://127.0.0.1:${port}/metrics`);
      await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(seen).toEqual([caller, undefined, undefined]);
      await waitFor(() => exporter.getFinishedSpans().length >= 1);
      const spans = exporter.getFinishedSpans();
      expect(spans).toHaveLength(1);
      expect(spans[0].kind).toBe(ApiSpanKind.SERVER);
      expect(spans[0].spanContext().traceId).toBe(caller);
      expect(spans[0].parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe.each(['memory', 'jetstream'] as const)('observed bus (%s)', (kind) => {
  let tb: TestBus;
  let bus: Bus;

  beforeAll(async () => {
    tb = await createTestBus(kind);
    bus = observeBus(tb.bus);
  });
  afterAll(() => tb.cleanup());
  beforeEach(() => exporter.reset());

  it('carries one trace from a publish through a consumer that publishes on, in the NATS headers', async () => {
    const seen: Array<Record<string, string>> = [];
    const first = await bus.consume({ stream: 'STEPS', durable: 'obs-email', filterSubject: 'steps.email' }, async (msg) => {
      seen.push({ ...msg.headers });
      await bus.publish('steps.result', enc.encode('done'), { msgId: `r-${msg.seq}` });
      msg.ack();
    });
    const second = await bus.consume({ stream: 'STEPS', durable: 'obs-result', filterSubject: 'steps.result' }, async (msg) => {
      seen.push({ ...msg.headers });
      msg.ack();
    });
    try {
      // No span is active here, as in the dispatcher's loop: the publish span starts the trace.
      await bus.publish('steps.email', enc.encode('step'), { msgId: 'a1' });
      await waitFor(() => seen.length === 2, { what: 'both messages handled' });
      await waitFor(() => exporter.getFinishedSpans().length >= 4, { what: 'four spans' });
      const spans = exporter.getFinishedSpans();
      const names = spans.map((s) => s.name).sort();
      expect(names).toEqual(['process steps.email', 'process steps.result', 'publish steps.email', 'publish steps.result']);
      const traceIds = new Set(spans.map((s) => s.spanContext().traceId));
      expect(traceIds.size).toBe(1);
      for (const headers of seen) expect(headers.traceparent).toMatch(new RegExp(`^00-${[...traceIds][0]}-[0-9a-f]{16}-01$`));
      const byName = new Map(spans.map((s) => [s.name, s]));
      // Each consumer span is the child of the publish span whose message it handles.
      expect(byName.get('process steps.email')?.parentSpanContext?.spanId).toBe(byName.get('publish steps.email')?.spanContext().spanId);
      expect(byName.get('publish steps.result')?.parentSpanContext?.spanId).toBe(byName.get('process steps.email')?.spanContext().spanId);
      expect(byName.get('process steps.result')?.parentSpanContext?.spanId).toBe(byName.get('publish steps.result')?.spanContext().spanId);
    } finally {
      await first.drain();
      await second.drain();
    }
  });

  it('makes the publish a child of the active span, and keeps a context the caller put in the headers', async () => {
    await withSpan('http request', {}, () => bus.publish('events.cascade.recipient.finished', enc.encode('e'), { msgId: 'e1' }));
    const stored = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await bus.publish('events.cascade.recipient.finished', enc.encode('e'), { msgId: 'e2', headers: { traceparent: stored } });
    const spans = exporter.getFinishedSpans();
    const request = spans.find((s) => s.name === 'http request');
    const publishes = spans.filter((s) => s.name === 'publish events.cascade.recipient.finished');
    expect(publishes).toHaveLength(2);
    expect(publishes[0].spanContext().traceId).toBe(request?.spanContext().traceId);
    expect(publishes[1].spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(publishes[1].parentSpanContext?.spanId).toBe('b7ad6b7169203331');
  });

  it('gives each message of a publishBatch its own PRODUCER span, the parent of that message\'s process span', async () => {
    const handled: string[] = [];
    const sub = await bus.consume({ stream: 'STEPS', durable: 'obs-batch', filterSubject: 'steps.batch.>' }, async (msg) => {
      handled.push(msg.subject);
      msg.ack();
    });
    try {
      const acks = await bus.publishBatch([
        { subject: 'steps.batch.a', data: enc.encode('a'), options: { msgId: 'ba' } },
        { subject: 'steps.batch.b', data: enc.encode('b'), options: { msgId: 'bb' } },
      ]);
      expect(acks.map((a) => a.duplicate)).toEqual([false, false]);
      await waitFor(() => handled.length === 2, { what: 'both messages handled' });
      await waitFor(() => exporter.getFinishedSpans().length >= 4, { what: 'four spans' });
      const spans = exporter.getFinishedSpans();
      const publishes = spans.filter((s) => s.name.startsWith('publish '));
      expect(publishes.map((s) => s.name).sort()).toEqual(['publish steps.batch.a', 'publish steps.batch.b']);
      expect(publishes.map((s) => s.kind)).toEqual([ApiSpanKind.PRODUCER, ApiSpanKind.PRODUCER]);
      for (const subject of ['steps.batch.a', 'steps.batch.b']) {
        const published = spans.find((s) => s.name === `publish ${subject}`);
        const processed = spans.find((s) => s.name === `process ${subject}`);
        expect(processed?.parentSpanContext?.spanId).toBe(published?.spanContext().spanId);
        expect(processed?.spanContext().traceId).toBe(published?.spanContext().traceId);
      }
    } finally {
      await sub.drain();
    }
  });

  it('publishBatch keeps a context the caller put in a message\'s headers, and marks every span of a failed batch', async () => {
    const stored = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await withSpan('http request', {}, () =>
      bus.publishBatch([
        { subject: 'events.batch.one', data: enc.encode('1'), options: { msgId: 'bc1', headers: { traceparent: stored } } },
        { subject: 'events.batch.two', data: enc.encode('2'), options: { msgId: 'bc2' } },
      ]),
    );
    const request = exporter.getFinishedSpans().find((s) => s.name === 'http request');
    const one = exporter.getFinishedSpans().find((s) => s.name === 'publish events.batch.one');
    const two = exporter.getFinishedSpans().find((s) => s.name === 'publish events.batch.two');
    expect(one?.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(one?.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(two?.parentSpanContext?.spanId).toBe(request?.spanContext().spanId);

    exporter.reset();
    await expect(
      bus.publishBatch([
        { subject: 'events.batch.one', data: enc.encode('1') },
        { subject: 'elsewhere.x', data: enc.encode('2') },
      ]),
    ).rejects.toThrow('elsewhere.x');
    const failed = exporter.getFinishedSpans();
    expect(failed.map((s) => s.name)).toEqual(['publish events.batch.one', 'publish elsewhere.x']);
    expect(failed.map((s) => s.status.code)).toEqual([2, 2]);
  });

  it('keeps the bus semantics: a throwing handler is redelivered, and the consumer span records the error', async () => {
    let deliveries = 0;
    const sub = await bus.consume({ stream: 'STEPS', durable: 'obs-sms', filterSubject: 'steps.sms', defaultNakDelayMs: 10 }, async (msg) => {
      deliveries++;
      if (msg.deliveryCount === 1) throw new Error('provider down');
      msg.ack();
    });
    try {
      await bus.publish('steps.sms', enc.encode('s'), { msgId: 's1' });
      await waitFor(() => deliveries === 2, { what: 'a redelivery' });
      await waitFor(() => exporter.getFinishedSpans().filter((s) => s.name === 'process steps.sms').length === 2);
      const failed = exporter.getFinishedSpans().filter((s) => s.name === 'process steps.sms' && s.status.code === 2);
      expect(failed).toHaveLength(1);
      expect(failed[0].status.message).toBe('provider down');
    } finally {
      await sub.drain();
    }
  });

  it('reports each consumer backlog at scrape time and stops when the consumer drains', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const sub = await bus.consume({ stream: 'STEPS', durable: 'obs-max', filterSubject: 'steps.max', concurrency: 1 }, async (msg) => {
      await gate;
      msg.ack();
    });
    try {
      for (let i = 0; i < 3; i++) await bus.publish('steps.max', enc.encode('m'), { msgId: `m${i}` });
      expect(await waitFor(async () => ((await lagOf('obs-max')) === 3 ? 3 : undefined), { what: 'lag 3' })).toBe(3);
      release();
      await waitFor(async () => ((await lagOf('obs-max')) === 0 ? true : undefined), { what: 'lag 0' });
    } finally {
      release();
      await sub.drain();
    }
    expect(await lagOf('obs-max')).toBeUndefined();
    expect(await registry.metrics()).not.toContain('consumer="obs-max"');
  });
});
