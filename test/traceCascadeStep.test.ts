import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { buildConfig, startAllInOne, type DevelopmentAllInOne } from '@rrs/all-in-one';
import { startTracing, type Tracing } from '@rrs/runtime';
import { createTestDatabase, testContext, waitFor, type TestDatabase } from '@rrs/testkit';

/**
 * One cascade step, traced: every service in one process (as `npm start`, against a test database and
 * the in-process bus) with the OpenTelemetry SDK exporting to memory. The step's dispatch, its handling
 * by the email sender, the send, the result and the scheduler applying it are one trace, carried in the
 * bus messages' headers. The trace goes on to the integrator's webhook: the delivery is attempted later,
 * from PostgreSQL, by the webhooks worker, in a span whose parent is the event's bus message — while the
 * request to the receiver itself carries no trace headers.
 */
describe('tracing across a cascade step', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing | null;
  let db: TestDatabase;
  let ctx: ReturnType<typeof testContext>;
  let running: DevelopmentAllInOne;
  const dataDir = mkdtempSync(join(tmpdir(), 'rrs-trace-'));
  /** The integrator's webhook receiver (loopback http: the all-in-one mode's dev setting allows it). */
  const received: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });

  beforeAll(async () => {
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    tracing = startTracing({ serviceName: 'review-request-service', spanProcessors: [new SimpleSpanProcessor(exporter)] });
    db = await createTestDatabase();
    ctx = testContext('all-in-one');
    running = (await startAllInOne(buildConfig({ DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'warn' }), ctx)) as DevelopmentAllInOne;
  });
  afterAll(async () => {
    await ctx?.stop();
    await db?.drop();
    await tracing?.shutdown();
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('gives the API call, the dispatch, the send, the applied result of a step and the webhook delivery one trace id', async () => {
    const auth = { authorization: `Bearer ${running.demo.apiKey}`, 'content-type': 'application/json' };
    const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/crm/reviews`;
    const hook = await fetch(`${running.url}/api/v1/webhooks`, { method: 'POST', headers: auth, body: JSON.stringify({ url: hookUrl, events: ['cascade.recipient.finished'], description: 'CRM' }) });
    expect(hook.status).toBe(201);
    const { locations } = (await (await fetch(`${running.url}/api/v1/locations`, { headers: auth })).json()) as { locations: Array<{ id: string }> };
    const locationId = locations[0]?.id;
    expect(locationId).toBeDefined();
    // No response window: the recipient finishes (and its event is relayed) as soon as its one step's result is applied.
    const patched = await fetch(`${running.url}/admin/v1/organizations/${running.demo.organizationId}`, {
      method: 'PATCH', headers: { authorization: `Bearer ${running.demo.adminToken}`, 'content-type': 'application/json' }, body: JSON.stringify({ responseWindowMinutes: 0 }),
    });
    expect(patched.status).toBe(200);
    const res = await fetch(`${running.url}/api/v1/cascades`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ locationId, channel: 'EMAIL', recipients: [{ name: 'Anna', email: 'anna@example.com' }] }),
    });
    expect(res.status).toBe(202);

    const send = await waitFor(() => exporter.getFinishedSpans().find((s) => s.name === 'send EMAIL'), { timeoutMs: 20_000, what: 'the email step sent' });
    const traceId = send.spanContext().traceId;
    const stepId = send.attributes['rrs.step_id'];
    expect(typeof stepId).toBe('string');

    const inTrace = (): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    await waitFor(() => inTrace().some((s) => s.name === 'process steps.result'), { timeoutMs: 20_000, what: "the scheduler's handling of the result" });
    const names = new Set(inTrace().map((s) => s.name));
    // One recipient: a small request's step, on the channel's small requests' subject.
    for (const name of ['publish steps.email.small', 'process steps.email.small', 'send EMAIL', 'publish steps.result', 'process steps.result']) {
      expect({ name, inTrace: names.has(name) }).toEqual({ name, inTrace: true });
    }
    // The trace starts at the API request: the step's publication is a child of the StartCascade call
    // made by POST /cascades (the context is stored with the cascade).
    const dispatch = inTrace().find((s) => s.name === 'publish steps.email.small');
    const post = inTrace().find((s) => s.kind === SpanKind.SERVER && s.attributes['http.request.method'] === 'POST');
    const start = inTrace().find((s) => s.attributes['rpc.method'] === 'StartCascade' && s.kind === SpanKind.SERVER);
    expect(post).toBeDefined();
    expect(start).toBeDefined();
    expect(dispatch?.parentSpanContext?.spanId).toBe(start?.spanContext().spanId);
    // ... and it ends with the finish event relayed to integrators, in the same trace.
    await waitFor(() => inTrace().some((s) => s.name === 'publish events.cascade.recipient.finished'), { timeoutMs: 20_000, what: 'the finish event published in the trace' });
    expect(running.outbox.list().some((m) => m.stepId === stepId)).toBe(true);

    // The webhook attempt, made by the delivery worker from the row the intake stored, is in the same
    // trace: a CLIENT span whose parent is the webhooks service's handling of the finish event.
    const attempt = await waitFor(() => inTrace().find((s) => s.name === 'deliver webhook'), { timeoutMs: 10_000, what: 'the webhook delivery span in the trace' });
    expect(attempt.spanContext().traceId).toBe(post?.spanContext().traceId);
    expect(attempt.kind).toBe(SpanKind.CLIENT);
    const intake = inTrace().find((s) => s.name === 'process events.cascade.recipient.finished' && s.attributes['messaging.consumer.group.name'] === 'webhooks');
    expect(attempt.parentSpanContext?.spanId).toBe(intake?.spanContext().spanId);
    expect(attempt.attributes).toMatchObject({ 'rrs.event_type': 'cascade.recipient.finished', 'rrs.webhook.outcome': 'delivered', 'http.response.status_code': 204 });
    // The receiver got the event, and nothing of our trace: it is an external party.
    const got = await waitFor(() => received.find((r) => r.headers['webhook-id'] === attempt.attributes['rrs.event_id']), { what: 'the webhook at the receiver' });
    expect(JSON.parse(got.body)).toMatchObject({ type: 'cascade.recipient.finished' });
    expect(Object.keys(got.headers).filter((h) => ['traceparent', 'tracestate', 'baggage'].includes(h))).toEqual([]);
  });

  it('continues the API caller\'s trace into the gRPC call that starts the cascade', async () => {
    const auth = { authorization: `Bearer ${running.demo.apiKey}`, 'content-type': 'application/json' };
    const { locations } = (await (await fetch(`${running.url}/api/v1/locations`, { headers: auth })).json()) as { locations: Array<{ id: string }> };
    const caller = '0af7651916cd43dd8448eb211c80319c';
    exporter.reset();
    const res = await fetch(`${running.url}/api/v1/cascades`, {
      method: 'POST',
      headers: { ...auth, traceparent: `00-${caller}-b7ad6b7169203331-01` },
      body: JSON.stringify({ locationId: locations[0].id, recipients: [{ name: 'Boris', email: 'boris@example.com' }] }),
    });
    expect(res.status).toBe(202);
    const start = await waitFor(() => exporter.getFinishedSpans().find((s) => s.attributes['rpc.method'] === 'StartCascade'), { what: 'the StartCascade span' });
    expect(start.spanContext().traceId).toBe(caller);
    const server = await waitFor(() => exporter.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER && s.attributes['http.request.method'] === 'POST'), { what: 'the HTTP span' });
    expect(server.spanContext().traceId).toBe(caller);
    expect(server.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
  });
});
