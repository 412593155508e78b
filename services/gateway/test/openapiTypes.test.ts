import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import {
  CASCADE_STATUSES, EVENT_TYPES, eventsV1, CONTACT_FIELDS, FINISH_REASONS, KNOWN_CHANNEL_KEYS, LOCALES, PLANS, RECIPIENT_STATUSES, REROUTE_REASONS, RATING_SOURCES, REVIEW_REQUEST_STATUSES, SCOPES,
  SKIP_REASONS, STEP_STATUSES, SUBSCRIBABLE_EVENT_TYPES, WEBHOOK_ATTEMPT_OUTCOMES, WEBHOOK_DELIVERY_STATUSES, WEBHOOK_DISABLED_REASONS, WEBHOOK_EVENT_TYPES,
} from '@rrs/proto';
import { createLogger } from '@rrs/runtime';
import { adminApi } from '../src/admin/api';
import { createFailureLimiters } from '../src/addressLimits';
import type { GatewayClients } from '../src/clients';
import { renderDocsPage } from '../src/docsPage';
import { serveApi } from '../src/http/api';
import { publicRoutes } from '../src/routes';
import { publicApi } from '../src/routes/api';
// The renderer of the bodies the webhooks service POSTs: the document's `webhooks` must describe its output.
import { renderBody } from '../../webhooks/src/payload';

/*
 * What a client generated from the documents (openapi-typescript) gets typed: the enums of @rrs/proto,
 * the contact field each channel send requires and its constant `channel`, headers that are optional
 * where they may be absent, and one problem schema per error status with exactly the route's codes.
 */

type Json = Record<string, unknown>;
type Operation = { requestBody?: { content: Record<string, { schema: Json }> }; responses: Record<string, { headers?: Record<string, Json>; content?: Record<string, { schema: Json }> }> };

const entry = (key: string, contactField: string, position: number) => ({ key, slug: key.toLowerCase(), label: key, contactField, capabilities: ['send'], sender: 'test', announcedAt: new Date(), providers: [], position });
const CATALOG = {
  list: () => [entry('EMAIL', 'email', 1), entry('SMS', 'phone', 2), entry('MAX', 'phone', 3), entry('TELEGRAM', 'phone', 4), entry('VIBER', 'phone', 5), entry('PIGEON', 'address', 6)],
  version: 1,
};

/** The public document as served; the modules can be given from another module registry (jest.isolateModules). */
function publicDocument(routes: typeof publicRoutes = publicRoutes, api: typeof publicApi = publicApi, serve: typeof serveApi = serveApi): Json {
  const deps = { clients: {} as GatewayClients, publicBaseUrl: 'https://reviews.acme.test', channelCatalog: CATALOG };
  return serve(api({ routes: routes(deps), authenticate: async () => Promise.reject(new Error('unused')), rateLimiter: {} as never, publicBaseUrl: deps.publicBaseUrl })).document();
}

const doc = publicDocument();
const admin = serveApi(adminApi({} as GatewayClients, { tokens: ['adm_test_token_0123456789'], failures: createFailureLimiters({ keyPrefix: '' }).adminAuth, logger: createLogger({ service: 'test', level: 'silent' }), publicBaseUrl: 'https://reviews.example.com' })).document();
const schemasOf = (d: Json) => (d.components as { schemas: Record<string, Json> }).schemas;
const op = (d: Json, path: string, method: string) => (d.paths as Record<string, Record<string, Operation>>)[path][method];
const problemPart = (o: Operation, status: number) => (o.responses[String(status)].content!['application/problem+json'].schema as { allOf: Json[] }).allOf[1] as { properties: { status: Json; code: { enum: string[] } }; required: string[] };

describe('the types of the OpenAPI documents', () => {
  it('carry every enum of @rrs/proto as a named schema with the same values', () => {
    const lists: Record<string, readonly string[]> = {
      CascadeStatus: CASCADE_STATUSES, RecipientStatus: RECIPIENT_STATUSES, FinishReason: FINISH_REASONS, SkipReason: SKIP_REASONS, RerouteReason: REROUTE_REASONS,
      ReviewRequestStatus: REVIEW_REQUEST_STATUSES, KnownChannelKey: KNOWN_CHANNEL_KEYS, ContactField: CONTACT_FIELDS, Scope: SCOPES,
      SubscribableEventType: SUBSCRIBABLE_EVENT_TYPES, WebhookEventType: WEBHOOK_EVENT_TYPES, WebhookDeliveryStatus: WEBHOOK_DELIVERY_STATUSES,
      WebhookAttemptOutcome: WEBHOOK_ATTEMPT_OUTCOMES, WebhookDisabledReason: WEBHOOK_DISABLED_REASONS, RatingSource: RATING_SOURCES,
    };
    for (const [name, values] of Object.entries(lists)) expect([name, schemasOf(doc)[name]?.enum]).toEqual([name, [...values]]);
    // A step's status: `skipped` with a SkipReason, or any other status of the list with a free reason.
    const step = schemasOf(doc).CascadeStep as { oneOf: Array<{ properties: { status: Json; reason: Json } }> };
    expect(step.oneOf.map((v) => v.properties.status)).toEqual([{ type: 'string', const: 'skipped' }, { type: 'string', enum: STEP_STATUSES.filter((s) => s !== 'skipped') }]);
    expect(step.oneOf[0].properties.reason).toEqual({ $ref: '#/components/schemas/SkipReason' });
    expect(schemasOf(admin).Plan.enum).toEqual([...PLANS]);
    expect(schemasOf(admin).Locale.enum).toEqual([...LOCALES]);
    expect(schemasOf(admin).Scope.enum).toEqual([...SCOPES]);
  });

  it('use them where the values are: statuses, reasons, channel keys and event types are never a plain string', () => {
    const getCascade = op(doc, '/cascades/{id}', 'get').responses['200'].content!['application/json'].schema as { properties: Record<string, Json> };
    expect(getCascade.properties.status).toEqual({ $ref: '#/components/schemas/CascadeStatus' });
    const text = JSON.stringify(doc.paths) + JSON.stringify(schemasOf(doc));
    for (const name of ['CascadeStatus', 'RecipientStatus', 'FinishReason', 'SkipReason', 'RerouteReason', 'ReviewRequestStatus', 'RatingSource', 'ChannelKey', 'ContactField', 'Scope', 'SubscribableEventType', 'WebhookEventType']) {
      expect([name, text.includes(`"#/components/schemas/${name}"`)]).toEqual([name, true]);
    }
    // The channel of a request is any channel key: the catalog is live.
    expect(schemasOf(doc).ChannelKey).toEqual({ anyOf: [{ $ref: '#/components/schemas/KnownChannelKey' }, { type: 'string', maxLength: 32, pattern: '^[A-Z][A-Z0-9_]{0,31}$' }], description: expect.any(String) });
  });

  it('a value added to a list in @rrs/proto appears in the validation and the document, with no other change', () => {
    jest.isolateModules(() => {
      const proto = require('@rrs/proto') as { RECIPIENT_STATUSES: string[]; SKIP_REASONS: string[]; SUBSCRIBABLE_EVENT_TYPES: string[] };
      proto.RECIPIENT_STATUSES.push('paused');
      proto.SKIP_REASONS.push('quiet_period');
      proto.SUBSCRIBABLE_EVENT_TYPES.push('cascade.recipient.opened');
      const routes = require('../src/routes') as { publicRoutes: typeof publicRoutes };
      const api = require('../src/routes/api') as { publicApi: typeof publicApi };
      const http = require('../src/http/api') as { serveApi: typeof serveApi };
      const enums = require('../src/routes/enums') as { SkipReason: { safeParse(v: unknown): { success: boolean } } };
      expect(enums.SkipReason.safeParse('quiet_period').success).toBe(true);
      const grown = schemasOf(publicDocument(routes.publicRoutes, api.publicApi, http.serveApi));
      expect(grown.RecipientStatus.enum).toEqual([...RECIPIENT_STATUSES, 'paused']);
      expect(grown.SkipReason.enum).toEqual([...SKIP_REASONS, 'quiet_period']);
      expect(grown.SubscribableEventType.enum).toEqual([...SUBSCRIBABLE_EVENT_TYPES, 'cascade.recipient.opened']);
    });
    expect(schemasOf(publicDocument()).SkipReason.enum).toEqual([...SKIP_REASONS]);
  });

  it.each([
    ['/channels/email/send', 'EMAIL', 'email'],
    ['/channels/sms/send', 'SMS', 'phone'],
    ['/channels/max/send', 'MAX', 'phone'],
    ['/channels/telegram/send', 'TELEGRAM', 'phone'],
    ['/channels/viber/send', 'VIBER', 'phone'],
  ])('POST %s requires %s\'s contact field of every recipient and answers its key as a constant', (path, key, field) => {
    const send = op(doc, path, 'post');
    const recipient = ((send.requestBody!.content['application/json'].schema.properties as Record<string, Json>).recipients.items as Json);
    expect(recipient.required).toEqual([field]);
    expect(Object.keys(recipient.properties as Json)).toEqual(['name', 'email', 'phone', 'consentAt']);
    const result = send.responses['202'].content!['application/json'].schema as { properties: Record<string, Json>; required: string[] };
    expect(result.properties.channel).toMatchObject({ const: key });
    expect(result.required).toContain('channel');
  });

  it('serves no send method for a catalog entry whose contact field recipients do not have', () => {
    expect(Object.keys(doc.paths as Json)).not.toContain('/channels/pigeon/send');
  });

  it('Idempotent-Replayed is an optional header of the successes of POSTs only; Retry-After is required on 429 and optional on a 409 that can be a busy key', () => {
    const paths = doc.paths as Record<string, Record<string, Operation>>;
    for (const [path, item] of Object.entries(paths)) {
      for (const [method, o] of Object.entries(item)) {
        for (const [status, r] of Object.entries(o.responses)) {
          const replayed = r.headers?.['Idempotent-Replayed'];
          if (method === 'post' && status.startsWith('2')) expect([path, replayed]).toEqual([path, { description: expect.stringContaining('only when'), required: false, schema: { type: 'string', const: 'true' }, example: 'true' }]);
          else expect([path, method, status, replayed]).toEqual([path, method, status, undefined]);
          if (status === '429') expect(r.headers?.['Retry-After']).toEqual({ $ref: '#/components/headers/RetryAfter' });
          if (status === '409') expect(r.headers?.['Retry-After']).toMatchObject({ required: false });
        }
      }
    }
    // Headers that are always present are $refs to required headers (a generated client types them as present).
    expect((doc.components as { headers: Record<string, Json> }).headers).toEqual({
      RequestId: expect.objectContaining({ required: true }), RateLimit: expect.objectContaining({ required: true }),
      RateLimitPolicy: expect.objectContaining({ required: true }), RetryAfter: expect.objectContaining({ required: true }),
    });
  });

  it('each error status has its own problem schema: the status a constant, the code an enum of exactly the route\'s codes, both required', () => {
    const contacts = op(doc, '/contacts', 'post');
    expect(problemPart(contacts, 409)).toEqual({
      type: 'object',
      properties: { status: { type: 'integer', const: 409 }, code: { type: 'string', enum: ['idempotency_key_reused', 'idempotency_key_in_use', 'email_not_confirmed'] } },
      required: ['status', 'code'],
    });
    expect(problemPart(op(doc, '/cascades', 'post'), 409).properties.code.enum).toEqual(['idempotency_key_reused', 'idempotency_key_in_use', 'email_not_confirmed', 'channel_not_configured']);
    expect(problemPart(op(doc, '/cascades', 'post'), 400).properties.code.enum).toEqual(['invalid_request', 'malformed_json', 'invalid_idempotency_key']);
    expect(problemPart(op(doc, '/cascades/{id}', 'get'), 404).properties.code.enum).toEqual(['not_found']);
    expect(problemPart(op(doc, '/webhooks', 'post'), 400).properties.code.enum).toEqual(['invalid_request', 'malformed_json', 'invalid_idempotency_key', 'webhook_url_not_allowed']);
    const ping = op(doc, '/ping', 'get');
    expect(Object.keys(ping.responses)).toEqual(['200', '401', '429', '503']);
    expect(problemPart(ping, 401).properties.code.enum).toEqual(['missing_api_key', 'invalid_api_key']);
    // Not rate-limited (the spec): its 429s are the per-address limit on invalid keys and the organization's recipient budget.
    expect(problemPart(op(doc, '/channels/max/send', 'post'), 429).properties.code.enum).toEqual(['too_many_auth_failures', 'recipient_quota_exceeded']);
    const adminCreate = op(admin, '/organizations', 'post');
    expect(problemPart(adminCreate, 401).properties.code.enum).toEqual(['missing_admin_token', 'invalid_admin_token']);
  });

  it('describes the webhook events a receiver gets, and the webhooks service renders exactly such bodies', () => {
    const webhooks = doc.webhooks as Record<string, { post: { requestBody: { content: { 'application/json': { schema: Json } } }; parameters: Json[] } }>;
    expect(Object.keys(webhooks)).toEqual([...WEBHOOK_EVENT_TYPES]);
    expect(webhooks['cascade.recipient.finished'].post.parameters.map((p) => p.$ref)).toEqual(['#/components/parameters/WebhookId', '#/components/parameters/WebhookTimestamp', '#/components/parameters/WebhookSignature']);
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema(doc, 'doc');
    const bodyOf = (type: string) => ajv.compile({ $ref: `doc#/webhooks/${type.replace(/~/g, '~0').replace(/\//g, '~1')}/post/requestBody/content/application~1json/schema` });
    const at = new Date('2026-05-01T12:30:00Z');
    const step = (order: number, status: string, reason: string, rerouted = '') => ({ order, channel: order === 1 ? 'EMAIL' : 'SMS', status, reason, sentAt: status === 'sent' ? at : undefined, reroutedTo: rerouted, deliveredAt: status === 'sent' ? at : undefined, provider: status === 'sent' ? 'smtp' : '' });
    const finished = (over: Partial<eventsV1.CascadeRecipientFinished>): eventsV1.Event => ({
      id: 'e1', type: EVENT_TYPES.cascadeRecipientFinished, organizationId: 'o', occurredAt: at,
      payload: {
        $case: 'cascadeRecipientFinished',
        cascadeRecipientFinished: {
          cascadeId: 'c', cascadeExternalId: '', reviewRequestId: 'rr', locationId: 'l', rating: 0, feedback: '', reason: 'exhausted', finishedAt: at,
          recipient: { id: 'r', name: '', email: 'a@example.com', phone: '', contactExternalId: '' },
          steps: [step(1, 'sent', ''), step(2, 'failed', 'no_balance', 'TELEGRAM')],
          ...over,
        },
      },
    });
    const events: eventsV1.Event[] = [
      finished({}),
      finished({ rating: 2, feedback: 'slow', reason: 'rated', cascadeExternalId: 'crm-1', steps: [step(1, 'sent', ''), step(2, 'canceled', '')] }),
      finished({ reason: 'unreachable', steps: [step(1, 'skipped', 'no_contact'), step(2, 'skipped', 'opted_out')] }),
      { id: 'e2', type: EVENT_TYPES.webhookTest, organizationId: 'o', occurredAt: at, payload: { $case: 'webhookTest', webhookTest: { endpointId: 'w', message: 'A test event' } } },
    ];
    for (const event of events) {
      const validate = bodyOf(event.type);
      const body = JSON.parse(renderBody(event)) as unknown;
      expect([event.type, validate(body) ? 'valid' : ajv.errorsText(validate.errors)]).toEqual([event.type, 'valid']);
    }
    // The check can fail: a body the renderer would not make is refused.
    expect(bodyOf(EVENT_TYPES.cascadeRecipientFinished)({ type: 'cascade.recipient.finished', timestamp: 't', data: {} })).toBe(false);
  });

  it('the docs page shows every operation, every named schema with its values, and every error code of the document', () => {
    for (const d of [doc, admin]) {
      const html = renderDocsPage(d);
      const items = [...Object.values(d.paths as Json), ...Object.values((d.webhooks as Json | undefined) ?? {})] as Array<Record<string, { operationId: string }>>;
      for (const item of items) for (const o of Object.values(item)) expect(html).toContain(`id="${o.operationId}"`);
      for (const [name, schema] of Object.entries(schemasOf(d))) {
        expect(html).toContain(`id="schema-${name}"`);
        for (const value of (schema.enum as string[] | undefined) ?? []) expect(html).toContain(`<code>${value}</code>`);
      }
      for (const code of Object.keys(d['x-error-codes'] as Json)) expect(html).toContain(`id="error-${code}"`);
    }
  });
});
