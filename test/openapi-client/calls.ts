/*
 * An integrator's script, compiled by test/openapiClient.test.ts under `tsc --strict` against the types
 * openapi-typescript generates from the served document (./api.ts, written beside it by the test), then
 * run against the all-in-one: every operation of the public API through openapi-fetch, and a `switch`
 * over every status enum of the document with no `default` that could hide a value the integrator
 * forgot. A value added to an enum makes this file fail to compile until it handles it.
 *
 * Prints one JSON object: the calls made (`METHOD /path`, status) and what the switches said.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import createClient from 'openapi-fetch';
import type { components, paths } from './api';

type Schemas = components['schemas'];

const baseUrl = process.env.BASE_URL!;
const client = createClient<paths>({ baseUrl: `${baseUrl}/api/v1`, headers: { Authorization: `Bearer ${process.env.API_KEY}` } });

const calls: Array<{ call: string; status: number }> = [];
const said = new Set<string>();

function unhandled(value: never): never {
  throw new Error(`unhandled value ${String(value)}`);
}

function cascadeStatus(status: Schemas['CascadeStatus']): string {
  switch (status) {
    case 'running': return 'cascade running';
    case 'finished': return 'cascade finished';
    default: return unhandled(status);
  }
}
function recipientStatus(status: Schemas['RecipientStatus']): string {
  switch (status) {
    case 'running': return 'recipient running';
    case 'waiting': return 'recipient waiting for a rating';
    case 'finished': return 'recipient finished';
    default: return unhandled(status);
  }
}
function finishReason(reason: Schemas['FinishReason']): string {
  switch (reason) {
    case 'rated': return 'rated';
    case 'exhausted': return 'every step done, no rating';
    case 'unreachable': return 'every step skipped';
    case 'unsubscribed': return 'unsubscribed';
    case 'canceled': return 'canceled';
    case 'cooldown': return 'skipped: asked within the cooldown';
    case 'no_consent': return 'skipped: no consent';
    default: return unhandled(reason);
  }
}
function erasureStatus(status: Schemas['PersonErasureStatus']): string {
  switch (status) {
    case 'pending': return 'erasure pending';
    case 'done': return 'erasure done';
    default: return unhandled(status);
  }
}
function skipReason(reason: Schemas['SkipReason']): string {
  switch (reason) {
    case 'no_contact': return 'skipped: no contact';
    case 'opted_out': return 'skipped: opted out';
    case 'channel_not_configured': return 'skipped: channel not configured';
    case 'cooldown': return 'skipped: cooldown';
    case 'no_consent': return 'skipped: no consent';
    case 'phone_not_allowed': return 'skipped: phone not allowed';
    default: return unhandled(reason);
  }
}
function rerouteReason(reason: Schemas['RerouteReason']): string {
  switch (reason) {
    case 'no_balance': return 'rerouted: no SMS balance';
    case 'unreachable': return 'rerouted: unreachable';
    case 'channel_not_configured': return 'rerouted: channel not configured';
    case 'account_unavailable': return 'rerouted: messenger account unavailable';
    default: return unhandled(reason);
  }
}
function stepStatus(step: Schemas['CascadeStep']): string {
  // The union is discriminated by `status`: a skipped step's reason is a SkipReason.
  switch (step.status) {
    case 'skipped': return skipReason(step.reason);
    case 'pending': return 'step pending';
    case 'scheduled': return 'step scheduled';
    case 'dispatched': return 'step dispatched';
    case 'sent': return 'step sent';
    case 'failed': return `step failed: ${step.reason ?? 'unknown'}`;
    case 'canceled': return 'step canceled';
    default: return unhandled(step);
  }
}
function reviewRequestStatus(status: Schemas['ReviewRequestStatus']): string {
  switch (status) {
    case 'created': return 'review request created';
    case 'opened': return 'review request opened';
    case 'rated': return 'review request rated';
    case 'feedback': return 'review request with feedback';
    case 'canceled': return 'review request canceled';
    default: return unhandled(status);
  }
}
function ratingSource(source: Schemas['RatingSource']): string {
  switch (source) {
    case 'cascade': return 'rating of a cascade';
    case 'review_request': return 'rating of a review request';
    default: return unhandled(source);
  }
}
const KNOWN_CHANNELS: Record<Schemas['KnownChannelKey'], true> = { EMAIL: true, SMS: true, MAX: true, TELEGRAM: true };
const isKnownChannel = (key: Schemas['ChannelKey']): key is Schemas['KnownChannelKey'] => Object.hasOwn(KNOWN_CHANNELS, key);
function channelKey(key: Schemas['ChannelKey']): string {
  // Channel keys are open (the catalog is live): a key deployed after this was written is not an error.
  if (!isKnownChannel(key)) return `channel ${key}`;
  switch (key) {
    case 'EMAIL': return 'channel email';
    case 'SMS': return 'channel SMS';
    case 'MAX': return 'channel MAX';
    case 'TELEGRAM': return 'channel Telegram';
    default: return unhandled(key);
  }
}
function contactField(field: Schemas['ContactField']): string {
  switch (field) {
    case 'email': return 'needs an email';
    case 'phone': return 'needs a phone';
    default: return unhandled(field);
  }
}
function scope(value: Schemas['Scope']): string {
  switch (value) {
    case 'locations:read':
    case 'contacts:write':
    case 'cascades:write':
    case 'cascades:read':
    case 'review-requests:write':
    case 'webhooks:read':
    case 'webhooks:write': return `scope ${value}`;
    default: return unhandled(value);
  }
}
function subscribableEventType(type: Schemas['SubscribableEventType']): string {
  switch (type) {
    case 'cascade.recipient.finished': return 'subscribed to finishes';
    case 'cascade.recipient.rated': return 'subscribed to late ratings';
    case 'review_request.rated': return 'subscribed to review request ratings';
    default: return unhandled(type);
  }
}
function webhookEventType(type: Schemas['WebhookEventType']): string {
  switch (type) {
    case 'cascade.recipient.finished': return 'event: finish';
    case 'cascade.recipient.rated': return 'event: late rating';
    case 'review_request.rated': return 'event: review request rated';
    case 'webhook.test': return 'event: test';
    default: return unhandled(type);
  }
}
function deliveryStatus(status: Schemas['WebhookDeliveryStatus']): string {
  switch (status) {
    case 'pending': return 'delivery pending';
    case 'delivered': return 'delivery delivered';
    case 'failed': return 'delivery failed';
    default: return unhandled(status);
  }
}
function attemptOutcome(outcome: Schemas['WebhookAttemptOutcome']): string {
  switch (outcome) {
    case 'delivered': return 'attempt delivered';
    case 'retry': return 'attempt to retry';
    case 'failed': return 'attempt failed';
    default: return unhandled(outcome);
  }
}
function disabledReason(reason: Schemas['WebhookDisabledReason']): string {
  switch (reason) {
    case 'manual': return 'disabled by hand';
    case 'gone': return 'disabled: 410 Gone';
    case 'failing': return 'disabled: failing';
    default: return unhandled(reason);
  }
}

const say = (...lines: string[]) => lines.forEach((line) => said.add(line));

/** The body of a success, recording the call; anything else stops the script with the problem. */
function ok<Data>(call: string, result: { data?: Data; error?: unknown; response: Response }): Data {
  calls.push({ call, status: result.response.status });
  if (result.data === undefined) throw new Error(`${call}: ${result.response.status} ${JSON.stringify(result.error)}`);
  return result.data;
}

async function main(): Promise<void> {
  const deliveries: string[] = [];
  const receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      deliveries.push(body);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;

  const ping = ok('GET /ping', await client.GET('/ping'));
  say(...ping.scopes.map(scope));
  const { channels } = ok('GET /channels', await client.GET('/channels'));
  say(...channels.flatMap((channel) => [channelKey(channel.key), contactField(channel.contactField)]));
  const { locations } = ok('GET /locations', await client.GET('/locations'));
  const locationId = locations[0].id;
  const { flows } = ok('GET /flows', await client.GET('/flows'));
  say(...flows.flatMap((flow) => flow.steps.map((step) => channelKey(step.channel))));

  const contact = ok('POST /contacts', await client.POST('/contacts', {
    params: { header: { 'Idempotency-Key': 'order-closed-501' } },
    body: { externalId: 'crm-501', name: 'Boris', email: 'boris@example.com', locationId, startCascade: true },
  }));
  if (contact.cascade) say(cascadeStatus(contact.cascade.status));
  const started = ok('POST /cascades', await client.POST('/cascades', {
    body: { locationId, externalId: 'deal-502', recipients: [{ name: 'Vera', email: 'vera@example.com' }, { name: 'Gleb' }] },
  }));
  say(cascadeStatus(started.status), ...started.flow.steps.map((step) => channelKey(step.channel)));
  const cascade = ok('GET /cascades/{id}', await client.GET('/cascades/{id}', { params: { path: { id: started.id } } }));
  say(cascadeStatus(cascade.status));
  for (const recipient of cascade.recipients) {
    say(recipientStatus(recipient.status));
    if (recipient.finishReason) say(finishReason(recipient.finishReason));
    for (const step of recipient.steps) {
      say(stepStatus(step), channelKey(step.channel));
      for (const hop of step.reroute?.hops ?? []) say(rerouteReason(hop.reason));
    }
  }
  const reviewRequest = ok('POST /review-requests', await client.POST('/review-requests', { body: { locationId, customerName: 'Dina', contact: 'dina@example.com' } }));
  say(reviewRequestStatus(reviewRequest.status));

  // Reconcile and stop: find the cascade of deal 502, cancel it and the review request, read the ratings feed.
  const found = ok('GET /cascades', await client.GET('/cascades', { params: { query: { externalId: 'deal-502', limit: 10 } } }));
  if (found.cascades[0]?.id !== started.id) throw new Error('GET /cascades did not find the cascade of deal-502');
  say(...found.cascades.map((c) => cascadeStatus(c.status)));
  const canceled = ok('POST /cascades/{id}/cancel', await client.POST('/cascades/{id}/cancel', { params: { path: { id: started.id } } }));
  for (const recipient of canceled.recipients) if (recipient.finishReason) say(finishReason(recipient.finishReason));
  const byExternalId = ok('POST /cascades/cancel', await client.POST('/cascades/cancel', { body: { externalId: 'crm-501' } }));
  say(`canceled by externalId: ${byExternalId.canceled.length}`);
  say(reviewRequestStatus(ok('POST /review-requests/{id}/cancel', await client.POST('/review-requests/{id}/cancel', { params: { path: { id: reviewRequest.id } } })).status));
  const feed = ok('GET /ratings', await client.GET('/ratings', { params: { query: { limit: 10 } } }));
  say(...feed.ratings.map((r) => ratingSource(r.source)), feed.hasMore ? 'feed continues' : 'feed up to date');

  // A customer asks to be forgotten: erase them and read the erasure's status.
  const erasure = ok('POST /people/erase', await client.POST('/people/erase', { body: { email: 'dina@example.com' } }));
  say(erasureStatus(erasure.status), erasureStatus(ok('GET /people/erasures/{id}', await client.GET('/people/erasures/{id}', { params: { path: { id: erasure.id } } })).status));

  const recipients = { email: [{ name: 'Egor', email: 'egor@example.com' }], phone: [{ name: 'Egor', phone: '+7 916 555-01-02' }] };
  say(channelKey(ok('POST /channels/email/send', await client.POST('/channels/email/send', { body: { locationId, recipients: recipients.email } })).channel));
  say(channelKey(ok('POST /channels/sms/send', await client.POST('/channels/sms/send', { body: { locationId, recipients: recipients.phone } })).channel));
  say(channelKey(ok('POST /channels/max/send', await client.POST('/channels/max/send', { body: { locationId, recipients: recipients.phone } })).channel));
  say(channelKey(ok('POST /channels/telegram/send', await client.POST('/channels/telegram/send', { body: { locationId, recipients: recipients.phone } })).channel));

  const created = ok('POST /webhooks', await client.POST('/webhooks', { body: { url: receiverUrl, events: ['cascade.recipient.finished', 'review_request.rated'], description: 'CRM' } }));
  say(...created.events.map(subscribableEventType));
  const id = created.id;
  say(...ok('GET /webhooks', await client.GET('/webhooks')).webhooks.flatMap((webhook) => webhook.events.map(subscribableEventType)));
  ok('GET /webhooks/{id}', await client.GET('/webhooks/{id}', { params: { path: { id } } }));
  ok('PATCH /webhooks/{id}', await client.PATCH('/webhooks/{id}', { params: { path: { id } }, body: { description: 'CRM (deals)' } }));
  ok('POST /webhooks/{id}/test', await client.POST('/webhooks/{id}/test', { params: { path: { id } } }));
  let delivery: Schemas['WebhookDeliveryStatus'] | undefined;
  let deliveryId = '';
  for (let attempt = 0; delivery !== 'delivered' && attempt < 200; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const page = await client.GET('/webhooks/{id}/deliveries', { params: { path: { id }, query: { limit: 10 } } });
    const latest = page.data?.deliveries[0];
    if (!latest) continue;
    delivery = latest.status;
    deliveryId = latest.id;
    if (delivery === 'delivered') {
      calls.push({ call: 'GET /webhooks/{id}/deliveries', status: page.response.status });
      say(webhookEventType(latest.eventType), deliveryStatus(latest.status), ...latest.attempts.map((a) => attemptOutcome(a.outcome)));
    }
  }
  if (delivery !== 'delivered' || deliveries.length === 0) throw new Error(`the test event was not delivered (${delivery})`);
  ok('POST /webhooks/{id}/deliveries/{deliveryId}/replay', await client.POST('/webhooks/{id}/deliveries/{deliveryId}/replay', { params: { path: { id, deliveryId } } }));
  const rotated = ok('POST /webhooks/{id}/rotate-secret', await client.POST('/webhooks/{id}/rotate-secret', { params: { path: { id } } }));
  if (rotated.secret === created.secret) throw new Error('the secret did not change');
  const disabled = ok('PATCH /webhooks/{id}', await client.PATCH('/webhooks/{id}', { params: { path: { id } }, body: { disabled: true } }));
  if (disabled.disabledReason) say(disabledReason(disabled.disabledReason));
  const removed = await client.DELETE('/webhooks/{id}', { params: { path: { id } } });
  calls.push({ call: 'DELETE /webhooks/{id}', status: removed.response.status });
  receiver.close();

  console.log(JSON.stringify({ calls, said: [...said].sort() }));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
