import { context, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { Bus, ConsumeOptions, MessageHandler, OutgoingMessage, PublishOptions, StreamName } from './bus';
import { gauge } from './metrics';
import { extractTraceContext, injectTraceContext, SpanKind, tracer, withSpan } from './tracing';

/*
 * Traces and consumer lag for every bus a service opens through `openBus`, so no service has to wire
 * either itself:
 * - publish runs in a PRODUCER span (child of the active span, or of the context the caller put in the
 *   headers) and writes that span's context into the message headers (`traceparent`); publishBatch does
 *   the same with one span per message, all ending when the batch settles;
 * - each delivered message is handled in a CONSUMER span whose parent is read from its headers, so a
 *   step published by the dispatcher, sent by a sender and answered on `steps.result` is one trace;
 * - each durable consumer the process reads is sampled for its backlog (`bus.pending`) at scrape time.
 */

const OBSERVED = Symbol('rrs.bus.observed');

/** How long a scrape waits for the server to report one consumer's backlog. */
const LAG_SAMPLE_TIMEOUT_MS = 2_000;

interface LagSource {
  bus: Bus;
  stream: StreamName;
  durable: string;
}

const lagSources = new Map<string, LagSource>();

const consumerLag = gauge({
  name: 'bus_consumer_pending_messages',
  help: 'Messages a durable bus consumer has not had acked yet (waiting + in flight), sampled at scrape time. Every replica reports the same consumer: aggregate with max.',
  labelNames: ['stream', 'consumer'],
  async collect() {
    await Promise.all(
      [...lagSources.values()].map(async (s) => {
        try {
          const pending = await withTimeout(s.bus.pending(s.stream, s.durable), LAG_SAMPLE_TIMEOUT_MS);
          this.set({ stream: s.stream, consumer: s.durable }, pending);
        } catch {
          // An unknown value is left out rather than reported as 0, which would read as "no backlog".
          this.remove({ stream: s.stream, consumer: s.durable });
        }
      }),
    );
  },
});

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Starts reporting the backlog of a durable consumer; the returned function stops it. */
export function watchConsumerLag(bus: Bus, stream: StreamName, durable: string): () => void {
  const key = `${stream}/${durable}`;
  const source: LagSource = { bus, stream, durable };
  lagSources.set(key, source);
  return () => {
    if (lagSources.get(key) !== source) return;
    lagSources.delete(key);
    consumerLag.remove({ stream, consumer: durable });
  };
}

/**
 * The bus with tracing on publish and consume and lag sampling of its consumers. Everything else is the
 * underlying bus, untouched; wrapping twice returns the same wrapper's behaviour.
 */
export function observeBus(bus: Bus): Bus {
  if ((bus as unknown as Record<symbol, unknown>)[OBSERVED]) return bus;

  const publish = (subject: string, data: Uint8Array, options: PublishOptions = {}) => {
    const given = options.headers ?? {};
    // A caller that carries a context of its own (e.g. one stored with the work) puts it in the headers.
    const parent = given.traceparent ? extractTraceContext(given) : undefined;
    return withSpan(
      `publish ${subject}`,
      { 'messaging.system': 'nats', 'messaging.destination.name': subject, 'messaging.operation': 'publish' },
      () => bus.publish(subject, data, { ...options, headers: injectTraceContext({ ...given }) }),
      { kind: SpanKind.PRODUCER, parent },
    );
  };

  const publishBatch = async (messages: OutgoingMessage[]) => {
    const spans: Span[] = new Array<Span>(messages.length);
    const active = context.active();
    const traced = messages.map((message, i) => {
      const given = message.options?.headers ?? {};
      const parent = given.traceparent ? extractTraceContext(given) : active;
      const span = tracer.startSpan(
        `publish ${message.subject}`,
        {
          kind: SpanKind.PRODUCER,
          attributes: { 'messaging.system': 'nats', 'messaging.destination.name': message.subject, 'messaging.operation': 'publish' },
        },
        parent,
      );
      spans[i] = span;
      // With tracing off the span has no context to carry, and the message goes through as the caller built it.
      if (!trace.isSpanContextValid(span.spanContext())) return message;
      const headers = injectTraceContext({ ...given }, trace.setSpan(parent, span));
      return { ...message, options: { ...message.options, headers } };
    });
    try {
      return await bus.publishBatch(traced);
    } catch (err) {
      for (const span of spans) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      }
      throw err;
    } finally {
      for (const span of spans) span.end();
    }
  };

  const consume = async (options: ConsumeOptions, handler: MessageHandler) => {
    const traced: MessageHandler = (msg) =>
      withSpan(
        `process ${msg.subject}`,
        {
          'messaging.system': 'nats',
          'messaging.destination.name': msg.subject,
          'messaging.operation': 'process',
          'messaging.consumer.group.name': options.durable,
          'messaging.message.delivery_count': msg.deliveryCount,
        },
        () => handler(msg),
        { kind: SpanKind.CONSUMER, parent: extractTraceContext(msg.headers) },
      );
    const subscription = await bus.consume(options, traced);
    const stopLag = watchConsumerLag(bus, options.stream, options.durable);
    return {
      async drain() {
        stopLag();
        await subscription.drain();
      },
    };
  };

  const close = async () => {
    for (const [key, source] of lagSources) if (source.bus === bus) lagSources.delete(key);
    await bus.close();
  };

  return new Proxy(bus, {
    get(target, prop) {
      if (prop === OBSERVED) return true;
      if (prop === 'publish') return publish;
      if (prop === 'publishBatch') return publishBatch;
      if (prop === 'consume') return consume;
      if (prop === 'close') return close;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
