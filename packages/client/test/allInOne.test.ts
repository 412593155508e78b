import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createReviewRequestClient, ReviewRequestApiError, verifyWebhook, WebhookVerificationError, type Rating, type ReviewRequestClient } from '@rrs/client';
import { startTestAllInOne, waitFor, type TestAllInOne } from '@rrs/testkit';

/*
 * The client against the real service (`npm start`'s all-in-one), as the README's CRM example uses it:
 * an order closed becomes a contact with `startCascade`, the customer rates, and the signed webhook that
 * follows is verified and tells the CRM which deal to mark rated.
 */

interface Delivery {
  headers: IncomingHttpHeaders;
  rawBody: string;
}

let service: TestAllInOne;
let receiver: Server;
let receiverUrl: string;
const deliveries: Delivery[] = [];
let client: ReviewRequestClient;

beforeAll(async () => {
  service = await startTestAllInOne();
  receiver = createServer((req, res) => {
    let rawBody = '';
    req.on('data', (chunk) => (rawBody += chunk));
    req.on('end', () => {
      deliveries.push({ headers: req.headers, rawBody });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/reviews`;
  client = createReviewRequestClient({ baseUrl: service.baseUrl, apiKey: service.apiKey });
}, 60_000);
afterAll(async () => {
  await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  await service?.remove();
});

describe('@rrs/client against the all-in-one', () => {
  it('authenticates with the API key', async () => {
    const { data, error } = await client.GET('/ping');
    expect(error).toBeUndefined();
    expect(data).toMatchObject({ ok: true, organization: { name: 'Demo Coffee' } });
    const stranger = createReviewRequestClient({ baseUrl: service.baseUrl, apiKey: 'rrs_' + 'B'.repeat(36) });
    const refused = await stranger.GET('/ping');
    expect(refused.response.status).toBe(401);
    expect(refused.error).toMatchObject({ status: 401, code: 'invalid_api_key' });
  });

  it('returns a problem of the route with its code, without retrying it', async () => {
    const { data, error, response } = await client.GET('/cascades/{id}', { params: { path: { id: '0190e0e0-4444-7000-8000-00000000dead' } } });
    expect(data).toBeUndefined();
    expect(response.status).toBe(404);
    expect(error).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('order closed → contact with startCascade; a redelivery with the same Idempotency-Key starts nothing new; rated → a verified webhook names the deal', async () => {
    const hook = await client.POST('/webhooks', { body: { url: receiverUrl, events: ['cascade.recipient.finished', 'cascade.recipient.rated'] } });
    expect(hook.response.status).toBe(201);
    const secret = hook.data!.secret;
    expect(secret).toMatch(/^whsec_/);

    const { data: listed } = await client.GET('/locations');
    const locationId = listed!.locations[0].id;
    const orderClosed = () => client.POST('/contacts', {
      params: { header: { 'Idempotency-Key': 'deal-1042-won' } },
      body: { externalId: 'deal-1042', name: 'Anna', email: 'anna.client@example.com', locationId, startCascade: true },
    });
    const first = await orderClosed();
    expect(first.response.status).toBe(200);
    expect(first.response.headers.get('idempotent-replayed')).toBeNull();
    const cascade = first.data!.cascade!;
    expect(cascade).toMatchObject({ status: 'running', queued: 1 });
    const again = await orderClosed();
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(again.data!.cascade!.id).toBe(cascade.id);

    const { data: started } = await client.GET('/cascades/{id}', { params: { path: { id: cascade.id } } });
    expect(started!.recipients).toHaveLength(1);

    // The customer follows the emailed link and gives five stars.
    type Message = { channel: string; to: string; link: string };
    const email = await waitFor(async () => {
      const { messages } = (await (await fetch(`${service.baseUrl}/dev/messages`)).json()) as { messages: Message[] };
      return messages.find((m) => m.channel === 'EMAIL' && m.to === 'anna.client@example.com');
    }, { what: 'the email in the dev inbox', timeoutMs: 20_000 });
    const form = await fetch(`${service.baseUrl}${new URL(email.link).pathname}`);
    const cookie = (form.headers.get('set-cookie') ?? '').split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]{32})"/.exec(await form.text())![1];
    const rated = await fetch(`${service.baseUrl}${new URL(email.link).pathname}/rating`, { method: 'POST', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: `rating=5&csrf=${csrf}`, redirect: 'manual' });
    expect(rated.status).toBe(303);

    const delivery = await waitFor(() => deliveries.find((d) => d.rawBody.includes('cascade.recipient.finished')), { what: 'the finish webhook', timeoutMs: 20_000 });
    const event = verifyWebhook(secret, delivery.rawBody, delivery.headers);
    // Rated while the cascade ran: the recipient finishes with reason `rated` (`cascade.recipient.rated` is a rating after the finish).
    if (event.type !== 'cascade.recipient.finished') throw new Error(`unexpected event ${event.type}`);
    expect(event.data).toMatchObject({ cascadeId: cascade.id, cascadeExternalId: 'deal-1042', rating: 5, reason: 'rated' });
    expect(event.data.recipient).toMatchObject({ contactExternalId: 'deal-1042' });

    // A changed body, another secret, or a stale timestamp do not verify.
    expect(() => verifyWebhook(secret, delivery.rawBody.replace('"rating":5', '"rating":1'), delivery.headers)).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`, delivery.rawBody, delivery.headers)).toThrow(WebhookVerificationError);
    const headers = new Headers(delivery.headers as Record<string, string>);
    expect(verifyWebhook(secret, Buffer.from(delivery.rawBody), headers)).toEqual(event);
    headers.set('webhook-timestamp', String(Math.floor(Date.now() / 1000) - 600));
    expect(() => verifyWebhook(secret, delivery.rawBody, headers)).toThrow(WebhookVerificationError);
  }, 60_000);

  it("the README's three tasks with the resource methods: stop an order's requests, find its cascade, catch up on the ratings", async () => {
    const { data: listed } = await client.GET('/locations');
    const locationId = listed!.locations[0].id;
    // Where this test's receiver starts reading: everything rated before it is not its business.
    let cursor: string | undefined;
    for await (const page of client.ratings.list({ limit: 500 })) cursor = page.nextCursor;

    // Two requests for order 2001 and one for order 2002.
    const start = (externalId: string, email: string) => client.cascades.create({ locationId, externalId, recipients: [{ name: 'Anna', email }] });
    const first = await start('order-2001', 'refund1.client@example.com');
    const second = await start('order-2001', 'refund2.client@example.com');
    const kept = await start('order-2002', 'kept.client@example.com');

    // Find: the cascades of order 2001, one page at a time.
    const found: string[] = [];
    for await (const page of client.cascades.list({ externalId: 'order-2001', limit: 1 })) found.push(...page.cascades.map((c) => c.id));
    expect(found).toEqual([second.id, first.id]);
    expect((await client.cascades.list({ externalId: 'order-2002' })).cascades.map((c) => c.id)).toEqual([kept.id]);

    // Stop: the order is refunded.
    expect((await client.cascades.cancelByExternalId('order-2001')).sort()).toEqual([first.id, second.id].sort());
    const canceled = await client.cascades.get(first.id);
    expect(canceled.recipients[0].finishReason).toBe('canceled');
    expect(await client.cascades.cancel(first.id, { idempotencyKey: 'refund-2001' })).toEqual(canceled);
    expect(await client.cascades.cancelByExternalId('order-2001')).toEqual([]);

    // Catch up: the customer of order 2002 rates; the receiver reads from its cursor and gets exactly that rating.
    type Message = { channel: string; to: string; link: string };
    const email = await waitFor(async () => {
      const { messages } = (await (await fetch(`${service.baseUrl}/dev/messages`)).json()) as { messages: Message[] };
      return messages.find((m) => m.channel === 'EMAIL' && m.to === 'kept.client@example.com');
    }, { what: 'the email in the dev inbox', timeoutMs: 20_000 });
    const form = await fetch(`${service.baseUrl}${new URL(email.link).pathname}`);
    const cookie = (form.headers.get('set-cookie') ?? '').split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]{32})"/.exec(await form.text())![1];
    const rated = await fetch(`${service.baseUrl}${new URL(email.link).pathname}/rating`, { method: 'POST', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: `rating=4&csrf=${csrf}`, redirect: 'manual' });
    expect(rated.status).toBe(303);
    const missed: Rating[] = [];
    for await (const page of client.ratings.list({ since: cursor })) {
      missed.push(...page.ratings);
      cursor = page.nextCursor;
    }
    expect(missed.map((r) => [r.cascadeId, r.cascadeExternalId, r.rating, r.late])).toEqual([[kept.id, 'order-2002', 4, false]]);
    expect((await client.ratings.list({ since: cursor })).ratings).toEqual([]);

    // A refusal is thrown with its problem.
    const refused = await client.cascades.cancel('0190e0e0-4444-7000-8000-00000000dead').catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ReviewRequestApiError);
    expect(refused).toMatchObject({ status: 404, code: 'not_found' });
    await expect(client.ratings.list({ since: 'not-a-cursor' })).rejects.toMatchObject({ status: 400, code: 'invalid_request', problem: { errors: [{ parameter: 'since' }] } });
  }, 60_000);
});
