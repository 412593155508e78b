import { randomUUID } from 'node:crypto';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { eventsV1, eventSubject, webhooksV1 } from '@rrs/proto';
import { createGrpcClient, startTracing, withSpan, type GrpcClientHandle, type Tracing } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startWebhooks } from '../src';
import { Receiver } from './support/receiver';
import { testWebhooksConfig } from './support/service';

/**
 * Each delivery attempt is a CLIENT span in the trace of what queued the delivery — the event's bus
 * message, the API call sending a test event, the replay call — whenever and however often it is
 * attempted. Receivers never get trace headers. Tracing exports to memory.
 */
describe('webhook delivery tracing', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing | null;
  let db: TestDatabase;
  let tb: TestBus;
  const ctx = testContext('webhooks-tracing');
  let grpc: GrpcClientHandle<webhooksV1.WebhooksServiceClient>;
  let api: GrpcClientHandle<webhooksV1.WebhooksServiceClient>['client'];
  const receiver = new Receiver();

  beforeAll(async () => {
    tracing = startTracing({ serviceName: 'webhooks-test', spanProcessors: [new SimpleSpanProcessor(exporter)] });
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    await receiver.start();
    const svc = await startWebhooks(
      testWebhooksConfig(db.url, tb.prefix, { policy: { retryScheduleMs: [0, 100, 100], timeoutMs: 1_000 } }),
      ctx,
      { bus: tb.bus },
    );
    grpc = createGrpcClient(webhooksV1.WebhooksServiceClient, `127.0.0.1:${svc.grpcPort}`);
    api = grpc.client;
  });
  afterAll(async () => {
    grpc?.close();
    await ctx.stop();
    await receiver.stop();
    await tb?.cleanup();
    await db?.drop();
    await tracing?.shutdown();
  });

  const attemptsOf = (eventId: string): ReadableSpan[] =>
    exporter
      .getFinishedSpans()
      .filter((s) => s.name === 'deliver webhook' && s.attributes['rrs.event_id'] === eventId)
      .sort((a, b) => Number(a.attributes['rrs.webhook.attempt']) - Number(b.attributes['rrs.webhook.attempt']));

  const register = async (org: string, path: string) =>
    (await api.createEndpoint({ organizationId: org, plan: 'standard', url: receiver.url(path), events: ['cascade.recipient.finished'], description: '' })).endpoint!;

  it('traces every attempt of an event under its bus message, and sends no trace headers to the receiver', async () => {
    const org = randomUUID();
    await register(org, '/flaky');
    receiver.reply = (_req, all) => (all.length === 1 ? { status: 503 } : { status: 200 });
    const producer = '4bf92f3577b34da6a3ce929d0e0e4736';
    const event: eventsV1.Event = {
      id: randomUUID(),
      type: 'cascade.recipient.finished',
      organizationId: org,
      occurredAt: new Date(),
      payload: { $case: 'cascadeRecipientFinished', cascadeRecipientFinished: { cascadeId: 'c-1', cascadeExternalId: '', reviewRequestId: '', locationId: '', rating: 0, feedback: '', reason: 'exhausted', steps: [], recipient: undefined, finishedAt: undefined } },
    };
    await tb.bus.publish(eventSubject(event.type), eventsV1.Event.encode(event).finish(), { headers: { traceparent: `00-${producer}-00f067aa0ba902b7-01` } });

    const attempts = await waitFor(() => attemptsOf(event.id).length === 2 && attemptsOf(event.id), { what: 'a failed then a delivered attempt' });
    const intake = exporter.getFinishedSpans().find((s) => s.name === `process ${eventSubject(event.type)}` && s.spanContext().traceId === producer);
    expect(intake?.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    for (const attempt of attempts) {
      expect(attempt.kind).toBe(SpanKind.CLIENT);
      expect(attempt.spanContext().traceId).toBe(producer);
      expect(attempt.parentSpanContext?.spanId).toBe(intake?.spanContext().spanId);
      expect(attempt.attributes['server.address']).toBe('127.0.0.1');
    }
    expect(attempts.map((a) => [a.attributes['rrs.webhook.attempt'], a.attributes['rrs.webhook.outcome'], a.attributes['http.response.status_code'], a.status.code])).toEqual([
      [1, 'retry', 503, SpanStatusCode.ERROR],
      [2, 'delivered', 200, SpanStatusCode.UNSET],
    ]);
    const got = receiver.at('/flaky');
    expect(got).toHaveLength(2);
    for (const r of got) expect(Object.keys(r.headers).filter((h) => ['traceparent', 'tracestate', 'baggage'].includes(h))).toEqual([]);
  });

  it('traces a test event under the API call that sent it, and a replay under the replay call', async () => {
    const org = randomUUID();
    const endpoint = await register(org, '/tests');
    receiver.reply = () => ({ status: 204 });

    const { traceId: sendTrace, delivery } = await withSpan('integrator sends a test', {}, async (span) => ({
      traceId: span.spanContext().traceId,
      delivery: (await api.sendTestEvent({ organizationId: org, id: endpoint.id })).delivery!,
    }));
    const [first] = await waitFor(() => attemptsOf(delivery.eventId).length === 1 && attemptsOf(delivery.eventId), { what: 'the test attempt' });
    expect(first.spanContext().traceId).toBe(sendTrace);
    const sendCall = exporter.getFinishedSpans().find((s) => s.attributes['rpc.method'] === 'SendTestEvent' && s.spanContext().traceId === sendTrace);
    expect(first.parentSpanContext?.spanId).toBe(sendCall?.spanContext().spanId);
    await waitFor(async () => (await api.listDeliveries({ organizationId: org, endpointId: endpoint.id, limit: 0, cursor: '' })).deliveries[0]?.status === 'delivered', { what: 'delivered' });

    const replayTrace = await withSpan('integrator replays', {}, async (span) => {
      await api.replayDelivery({ organizationId: org, endpointId: endpoint.id, deliveryId: delivery.id });
      return span.spanContext().traceId;
    });
    expect(replayTrace).not.toBe(sendTrace);
    const attempts = await waitFor(() => attemptsOf(delivery.eventId).length === 2 && attemptsOf(delivery.eventId), { what: 'the replayed attempt' });
    expect(attempts[1].spanContext().traceId).toBe(replayTrace);
    expect(receiver.at('/tests').map((r) => r.headers['webhook-id'])).toEqual([delivery.eventId, delivery.eventId]);
  });
});
