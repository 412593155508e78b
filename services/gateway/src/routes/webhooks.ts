import { z } from 'zod';
import { EVENT_DATA_SCOPES, PLANS, WEBHOOK_FAN_OUT, type webhooksV1 } from '@rrs/proto';
import { ForbiddenError } from '@rrs/runtime';
import type { Principal } from '../http/auth';
import { defineRoute, type Route } from '../http/route';
import type { PublicRouteDeps } from './deps';
import { SubscribableEventType, WebhookAttemptOutcome, WebhookDeliveryStatus, WebhookDisabledReason, WebhookEventType } from './enums';
import { isoOrNull } from './shapes';

/*
 * /api/v1/webhooks: the organization's webhook endpoints and their delivery log. The webhooks service
 * owns every rule (the SSRF guard on the URL, known event types, secrets and rotation, the retry
 * schedule, tenant isolation); the schemas here document the shape and refuse what is malformed before
 * any call. Delivery itself is described in docs/webhooks.md.
 */

const CreateWebhookBody = z.strictObject({
  url: z.string().min(1).max(2048).meta({ description: 'Where events are POSTed: https, to a public address (private, loopback, link-local and metadata addresses are refused).' }),
  events: z.array(SubscribableEventType).min(1).max(20).meta({ description: 'Event types to deliver.' }),
  description: z.string().max(500).default('').meta({ description: 'Your note about the endpoint.' }),
});

const UpdateWebhookBody = z.strictObject({
  url: z.string().min(1).max(2048).optional(),
  events: z.array(SubscribableEventType).min(1).max(20).optional(),
  description: z.string().max(500).optional(),
  disabled: z.boolean().optional().meta({ description: 'false enables a disabled endpoint again (its failure state is cleared); true disables it.' }),
});

const Webhook = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(SubscribableEventType),
  description: z.string(),
  disabled: z.boolean(),
  disabledReason: WebhookDisabledReason.nullable().meta({ description: 'Why the endpoint is disabled; null while enabled.' }),
  disabledAt: z.string().nullable(),
  failingSince: z.string().nullable().meta({ description: 'Start of the current run of failed attempts; null after a success.' }),
  previousSecretExpiresAt: z.string().nullable().meta({ description: 'After a rotation, until then deliveries are also signed with the previous secret.' }),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const WebhookWithSecret = Webhook.extend({
  secret: z.string().meta({ description: 'The signing secret, `whsec_` + base64. Shown only in this response: store it.' }),
});

const Attempt = z.object({
  number: z.number().int(),
  startedAt: z.string(),
  durationMs: z.number().int(),
  statusCode: z.number().int().nullable().meta({ description: 'null when no response came (timeout, connection error, refused address).' }),
  responseBody: z.string().meta({ description: 'The start of the response body (at most 4 KiB).' }),
  error: z.string().nullable(),
  outcome: WebhookAttemptOutcome,
});

const Delivery = z.object({
  id: z.string(),
  eventId: z.string().meta({ description: 'The `webhook-id` header of every attempt.' }),
  eventType: WebhookEventType,
  status: WebhookDeliveryStatus,
  attemptCount: z.number().int(),
  nextAttemptAt: z.string().nullable().meta({ description: 'When the next attempt is due; null unless pending.' }),
  createdAt: z.string(),
  updatedAt: z.string(),
  attempts: z.array(Attempt),
});

const IdParams = z.object({ id: z.uuid() });
const DeliveryParams = z.object({ id: z.uuid(), deliveryId: z.uuid() });
const DeliveriesQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).optional().meta({ description: 'Page size, 1 to 100 (50 when absent).' }),
  cursor: z.uuid().optional().meta({ description: '`nextCursor` of the previous page.', examples: ['0190c3c4-0000-7000-8000-000000000002'] }),
});

function webhookJson(e: webhooksV1.Endpoint) {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    description: e.description,
    disabled: e.disabled,
    disabledReason: (e.disabledReason || null) as 'manual' | 'gone' | 'failing' | null,
    disabledAt: isoOrNull(e.disabledAt),
    failingSince: isoOrNull(e.failingSince),
    previousSecretExpiresAt: isoOrNull(e.previousSecretExpiresAt),
    createdAt: e.createdAt!.toISOString(),
    updatedAt: e.updatedAt!.toISOString(),
  };
}

function deliveryJson(d: webhooksV1.Delivery) {
  return {
    id: d.id,
    eventId: d.eventId,
    eventType: d.eventType,
    status: d.status as 'pending' | 'delivered' | 'failed',
    attemptCount: d.attemptCount,
    nextAttemptAt: isoOrNull(d.nextAttemptAt),
    createdAt: d.createdAt!.toISOString(),
    updatedAt: d.updatedAt!.toISOString(),
    attempts: d.attempts.map((a) => ({
      number: a.number,
      startedAt: a.startedAt!.toISOString(),
      durationMs: a.durationMs,
      statusCode: a.statusCode === 0 ? null : a.statusCode,
      responseBody: a.responseBody,
      error: a.error || null,
      outcome: a.outcome as 'delivered' | 'retry' | 'failed',
    })),
  };
}

const URL_NOT_ALLOWED = {
  status: 400,
  code: 'webhook_url_not_allowed',
  description:
    'The URL is not https (`reason` `scheme`), carries credentials (`credentials`), is not a URL (`invalid_url`), is a literal IP address webhooks may not reach (`address`, with `range`: private, loopback, link-local, unique-local, multicast, CGNAT, cloud metadata…), or names a host that does not resolve to public addresses only (`host_not_public`, one answer whether it does not resolve or resolves to a refused address, never saying which or to what).',
};
const ENDPOINT_DISABLED = { status: 409, code: 'webhook_endpoint_disabled', description: 'The endpoint is disabled; enable it with PATCH `{"disabled": false}` first.' };
const ENDPOINT_LIMIT = {
  status: 409,
  code: 'webhook_endpoint_limit',
  description: `The organization already has the most webhook endpoints its plan allows (${PLANS.map((plan) => `${plan} ${WEBHOOK_FAN_OUT[plan].endpoints}`).join(', ')}); \`limit\` says how many. Nothing is created.`,
};
const EXAMPLE_ID = '0190c3c4-0000-7000-8000-000000000001';
const EXAMPLE_WEBHOOK = {
  id: EXAMPLE_ID,
  url: 'https://crm.example.com/hooks/reviews',
  events: ['cascade.recipient.finished'],
  description: 'CRM',
  disabled: false,
  disabledReason: null,
  disabledAt: null,
  failingSince: null,
  previousSecretExpiresAt: null,
  createdAt: '2026-05-01T09:00:00.000Z',
  updatedAt: '2026-05-01T09:00:00.000Z',
};
const EXAMPLE_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const EXAMPLE_DELIVERY = {
  id: '0190c3c4-0000-7000-8000-000000000002',
  eventId: '0190c3c4-0000-7000-8000-000000000003',
  eventType: 'cascade.recipient.finished',
  status: 'delivered',
  attemptCount: 2,
  nextAttemptAt: null,
  createdAt: '2026-05-01T12:00:00.000Z',
  updatedAt: '2026-05-01T12:00:05.400Z',
  attempts: [
    { number: 1, startedAt: '2026-05-01T12:00:00.100Z', durationMs: 10000, statusCode: null, responseBody: '', error: 'timeout after 10000 ms', outcome: 'retry' },
    { number: 2, startedAt: '2026-05-01T12:00:05.100Z', durationMs: 240, statusCode: 200, responseBody: 'ok', error: null, outcome: 'delivered' },
  ],
};
const EXAMPLE_TEST_DELIVERY = { ...EXAMPLE_DELIVERY, eventType: 'webhook.test', status: 'pending', attemptCount: 0, nextAttemptAt: '2026-05-01T12:00:00.000Z', updatedAt: '2026-05-01T12:00:00.000Z', attempts: [] };

/** 403 `insufficient_scope` unless the key may read the data of every event type it subscribes to. */
function checkEventScopes(principal: Principal, events: readonly string[] | undefined): void {
  for (const type of events ?? []) {
    const scope = EVENT_DATA_SCOPES[type];
    if (scope && !principal.scopes.includes(scope)) {
      throw new ForbiddenError('insufficient_scope', `subscribing to ${type} delivers data that needs the scope ${scope}`, { details: { requiredScope: scope } });
    }
  }
}

const DATA_SCOPES = [...new Set(Object.values(EVENT_DATA_SCOPES))];

export function webhookRoutes({ clients }: Pick<PublicRouteDeps, 'clients'>): Route[] {
  const webhooks = () => clients.webhooks;
  /**
   * Whoever changes, tests, rotates, replays or deletes an endpoint decides where its data goes next
   * (a new URL, a replayed delivery, a secret to verify with), so the key needs the scope of the data of
   * every event the endpoint has, as well as of the events the change gives it: the endpoint's events,
   * not only those named in the body, decide (docs/security.md, "Events need the scope of their data").
   * A key with every data scope needs no look-up.
   */
  const checkEndpointScopes = async (principal: Principal, id: string, metadata: Record<string, string>, newEvents?: readonly string[]) => {
    checkEventScopes(principal, newEvents);
    if (DATA_SCOPES.every((scope) => principal.scopes.includes(scope))) return;
    const { endpoint } = await webhooks().getEndpoint({ organizationId: principal.organization.id, id }, { metadata });
    checkEventScopes(principal, endpoint!.events);
  };
  return [
    defineRoute({
      method: 'POST',
      path: '/webhooks',
      operationId: 'createWebhook',
      summary: 'Register a webhook endpoint',
      description: 'Events of the chosen types are POSTed to the URL, signed per Standard Webhooks v1 with the secret in this response (shown once). See the webhooks guide for the payload, retries and verification.',
      tags: ['webhooks'],
      auth: 'apiKey',
      scope: 'webhooks:write',
      rateLimited: true,
      request: { body: CreateWebhookBody },
      responses: { 201: { description: 'The endpoint, with its signing secret.', body: WebhookWithSecret, example: { ...EXAMPLE_WEBHOOK, secret: EXAMPLE_SECRET } } },
      errors: [URL_NOT_ALLOWED, ENDPOINT_LIMIT],
      example: { body: { url: 'https://crm.example.com/hooks/reviews', events: ['cascade.recipient.finished'], description: 'CRM' } },
      handler: async ({ body, principal, metadata }) => {
        checkEventScopes(principal, body.events);
        const r = await webhooks().createEndpoint({ organizationId: principal.organization.id, plan: principal.organization.plan, url: body.url, events: body.events, description: body.description }, { metadata });
        return { status: 201, body: { ...webhookJson(r.endpoint!), secret: r.secret }, replayed: r.idempotentReplayed };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/webhooks',
      operationId: 'listWebhooks',
      summary: 'List webhook endpoints',
      tags: ['webhooks'],
      auth: 'apiKey',
      scope: 'webhooks:read',
      rateLimited: true,
      responses: { 200: { description: "The organization's endpoints, oldest first.", body: z.object({ webhooks: z.array(Webhook) }), example: { webhooks: [EXAMPLE_WEBHOOK] } } },
      handler: async ({ principal, metadata }) => {
        const r = await webhooks().listEndpoints({ organizationId: principal.organization.id }, { metadata });
        return { body: { webhooks: r.endpoints.map(webhookJson) } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/webhooks/{id}',
      operationId: 'getWebhook',
      summary: 'Get a webhook endpoint',
      description: 'Shows whether the endpoint is disabled and why (`gone` after a 410, `failing` after 5 days of failed attempts).',
      tags: ['webhooks'],
      auth: 'apiKey',
      scope: 'webhooks:read',
      rateLimited: true,
      request: { params: IdParams },
      responses: { 200: { description: 'The endpoint.', body: Webhook, example: EXAMPLE_WEBHOOK } },
      example: { params: { id: EXAMPLE_ID } },
      handler: async ({ params, principal, metadata }) => {
        const r = await webhooks().getEndpoint({ organizationId: principal.organization.id, id: params.id }, { metadata });
        return { body: webhookJson(r.endpoint!) };
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: '/webhooks/{id}',
      operationId: 'updateWebhook',
      summary: 'Change a webhook endpoint',
      description: 'Changes only the fields sent. `disabled: false` enables a disabled endpoint (deliveries failed while it was disabled can be replayed).',
      tags: ['webhooks'],
      auth: 'apiKey',
      scope: 'webhooks:write',
      rateLimited: true,
      request: { params: IdParams, body: UpdateWebhookBody },
      responses: { 200: { description: 'The endpoint as changed.', body: Webhook, example: EXAMPLE_WEBHOOK } },
      errors: [URL_NOT_ALLOWED],
      example: { params: { id: EXAMPLE_ID }, body: { disabled: false } },
      handler: async ({ params, body, principal, metadata }) => {
        await checkEndpointScopes(principal, params.id, metadata, body.events);
        const r = await webhooks().updateEndpoint(
          { organizationId: principal.organization.id, id: params.id, url: body.url, events: body.events ? { types: body.events } : undefined, description: body.description, disabled: body.disabled },
          { metadata },
        );
        return { body: webhookJson(r.endpoint!) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: '/webhooks/{id}',
      operationId: 'deleteWebhook',
      summary: 'Delete a webhook endpoint',
      description: 'Deletes the endpoint and its delivery log; nothing more is sent to it.',
      tags: ['webhooks'],
      auth: 'apiKey',
      scope: 'webhooks:write',
      rateLimited: true,
      request: { params: IdParams },
      responses: { 204: { description: 'Deleted.' } },
      example: { params: { id: EXAMPLE_ID } },
      handler: async ({ params, principal, metadata }) => {
        await checkEndpointScopes(principal, params.id, metadata);
        await webhooks().deleteEndpoint({ organizationId: principal.organization.id, id: params.id }, { metadata });
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/webhooks/{id}/rotate-secret',
      operationId: 'rotateWebhookSecret',
      summary: 'Rotate the signing secret',
      description: 'Issues a new secret (in this response only). For a grace period of 24 hours every delivery carries two signatures, one per secret, so receivers can switch without missing a webhook.',
      tags: ['webhooks'],
      auth: 'apiKey',
      scope: 'webhooks:write',
      rateLimited: true,
      request: { params: IdParams },
      responses: {
        200: {
          description: 'The endpoint, with its new secret.',
          body: WebhookWithSecret,
          example: { ...EXAMPLE_WEBHOOK, previousSecretExpiresAt: '2026-05-02T12:00:00.000Z', updatedAt: '2026-05-01T12:00:00.000Z', secret: EXAMPLE_SECRET },
        },
      },
      example: { params: { id: EXAMPLE_ID } },
      handler: async ({ params, principal, metadata }) => {
        await checkEndpointScopes(principal, params.id, metadata);
        const r = await webhooks().rotateSecret({ organizationId: principal.organization.id, id: params.id }, { metadata });
        return { body: { ...webhookJson(r.endpoint!), secret: r.secret }, replayed: r.idempotentReplayed };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/webhooks/{id}/test',
      operationId: 'testWebhook',
      summary: 'Send a test event',
      description: 'Queues a `webhook.test` event for this endpoint only, delivered like any other (signed, retried).',
      tags: ['webhooks'],
      auth: 'apiKey',
      scope: 'webhooks:write',
      rateLimited: true,
      request: { params: IdParams },
      responses: { 202: { description: 'The queued delivery.', body: Delivery, example: EXAMPLE_TEST_DELIVERY } },
      errors: [ENDPOINT_DISABLED],
      example: { params: { id: EXAMPLE_ID } },
      handler: async ({ params, principal, metadata }) => {
        await checkEndpointScopes(principal, params.id, metadata);
        const r = await webhooks().sendTestEvent({ organizationId: principal.organization.id, id: params.id }, { metadata });
        return { status: 202, body: deliveryJson(r.delivery!), replayed: r.idempotentReplayed };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/webhooks/{id}/deliveries',
      operationId: 'listWebhookDeliveries',
      summary: 'The delivery log of an endpoint',
      description: 'Deliveries, newest first, each with its attempts (status codes, durations, errors) and when the next retry is due.',
      tags: ['webhooks'],
      auth: 'apiKey',
      scope: 'webhooks:read',
      rateLimited: true,
      request: { params: IdParams, query: DeliveriesQuery },
      responses: {
        200: {
          description: 'A page of deliveries.',
          body: z.object({ deliveries: z.array(Delivery), nextCursor: z.string().nullable().meta({ description: 'Pass as `cursor` for the next page; null on the last page.' }) }),
          example: { deliveries: [EXAMPLE_DELIVERY], nextCursor: null },
        },
      },
      example: { params: { id: EXAMPLE_ID }, query: { limit: '20' } },
      handler: async ({ params, query, principal, metadata }) => {
        const r = await webhooks().listDeliveries({ organizationId: principal.organization.id, endpointId: params.id, limit: query.limit ?? 0, cursor: query.cursor ?? '' }, { metadata });
        return { body: { deliveries: r.deliveries.map(deliveryJson), nextCursor: r.nextCursor || null } };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/webhooks/{id}/deliveries/{deliveryId}/replay',
      operationId: 'replayWebhookDelivery',
      summary: 'Replay a delivery',
      description: 'Sends the delivery again at once, with a fresh retry schedule. The `webhook-id` is the same as before: receivers that already processed it will skip it.',
      tags: ['webhooks'],
      auth: 'apiKey',
      scope: 'webhooks:write',
      rateLimited: true,
      request: { params: DeliveryParams },
      responses: { 202: { description: 'The delivery, queued.', body: Delivery, example: { ...EXAMPLE_DELIVERY, status: 'pending', nextAttemptAt: '2026-05-02T08:00:00.000Z', updatedAt: '2026-05-02T08:00:00.000Z' } } },
      errors: [ENDPOINT_DISABLED],
      example: { params: { id: EXAMPLE_ID, deliveryId: '0190c3c4-0000-7000-8000-000000000002' } },
      handler: async ({ params, principal, metadata }) => {
        await checkEndpointScopes(principal, params.id, metadata);
        const r = await webhooks().replayDelivery({ organizationId: principal.organization.id, endpointId: params.id, deliveryId: params.deliveryId }, { metadata });
        return { status: 202, body: deliveryJson(r.delivery!), replayed: r.idempotentReplayed };
      },
    }),
  ];
}
