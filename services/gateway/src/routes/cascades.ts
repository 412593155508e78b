import { z } from 'zod';
import { CASCADE_COUNT_KEYS, MAX_CASCADE_PAGE, MAX_RECIPIENTS_PER_REQUEST, STEP_STATUSES, stepDelivery, type CascadeCountKey, type schedulerV1 } from '@rrs/proto';
import { defineRoute, type Route } from '../http/route';
import { startCascade } from '../useCases/cascades';
import type { PublicRouteDeps } from './deps';
import { CascadeStatus, ChannelKey, FinishReason, RecipientStatus, RerouteReason, SkipReason, StepDelivery } from './enums';
import { ConsentAt, cursorParameter, encodeCursor, EXAMPLE_FLOW_STEPS, EXAMPLE_IDS, FlowStepJson, flowStepJson, IgnoreCooldown, isoOrNull, orNull } from './shapes';

const Recipient = z.strictObject({
  name: z.string().max(200).optional(),
  email: z.email().max(254).optional(),
  phone: z.string().max(64).optional().meta({ description: "Any format; normalized to E.164 (numbers without a country code are read in the organization's region)." }),
  consentAt: ConsentAt,
});

export const StartCascadeBody = z
  .strictObject({
    locationId: z.string().min(1).max(64).meta({ description: 'An id from GET /locations; an unknown one is 404.' }),
    name: z.string().max(200).optional().meta({ description: 'Name of the mailing, for history.' }),
    flowId: z.string().min(1).max(64).optional().meta({ description: "Default: the organization's default flow. Mutually exclusive with `channel`." }),
    channel: ChannelKey.optional().meta({
      description: 'A one-step cascade in this channel (any channel of GET /channels, including one added at run time). Mutually exclusive with `flowId`. A channel the organization has not configured, or that no sender runs, is 409 `channel_not_configured`.',
    }),
    externalId: z.string().max(200).optional().meta({ description: 'Your id (order number, deal id); returned in GET /cascades/{id} and in the finish event.' }),
    recipients: z.array(Recipient).min(1, `1 to ${MAX_RECIPIENTS_PER_REQUEST} recipients`).max(MAX_RECIPIENTS_PER_REQUEST, `at most ${MAX_RECIPIENTS_PER_REQUEST} recipients per request`),
    ignoreCooldown: IgnoreCooldown,
  })
  .superRefine((b, ctx) => {
    if (b.flowId !== undefined && b.channel !== undefined) ctx.addIssue({ code: 'custom', path: ['channel'], message: 'flowId and channel are mutually exclusive' });
  });

export const StartCascadeResponse = z.object({
  id: z.string(),
  status: CascadeStatus,
  queued: z.number().int().meta({ description: 'Recipients put in the queue.' }),
  skipped: z.number().int().meta({ description: 'Recipients not put in the queue: no usable contact for any step of the flow, opted out, no consent where required, or within the cooldown (their `finishReason` says which; docs/customer-respect.md).' }),
  flow: z.object({
    id: z.string().nullable().meta({ description: 'null for a one-step `channel` cascade.' }),
    name: z.string(),
    steps: z.array(FlowStepJson),
  }),
});

const Reroute = z
  .object({
    to: ChannelKey.meta({ description: 'The channel the step finally went through.' }),
    hops: z.array(z.object({ from: ChannelKey, to: ChannelKey, reason: RerouteReason })),
  })
  .meta({ id: 'Reroute', description: 'How a phone step moved along SMS → MAX → TELEGRAM.' })
  .nullable()
  .meta({ description: 'How the step was rerouted; null when it stayed in its channel.' });

const stepFields = {
  order: z.number().int(),
  channel: ChannelKey.meta({ description: "The flow step's channel (a reroute may have sent it through another: `reroute.to`)." }),
  dueAt: z.string().nullable(),
  sentAt: z.string().nullable(),
  skippedAt: z.string().nullable(),
  deliveredAt: z.string().nullable().meta({ description: 'When a delivery receipt said the message reached the recipient (channels with receipts: SMS, Postmark email); null otherwise. A negative receipt leaves `reason` `undelivered: <reason>` instead.' }),
  provider: z.string().nullable().meta({ description: 'The provider that took the message once sent, or that refused it for a failed step (e.g. `smtp`, `postmark`, `smsc`, `smsru`, `greenapi`, or `telegram_bot` / `max_bot` for a customer who linked the official bot); null before or when unknown.' }),
  delivery: StepDelivery,
  reroute: Reroute,
};

/** A step by its status: a skipped step always names its SkipReason; any other step may carry a reason of its sender. */
const StepJson = z
  .discriminatedUnion('status', [
    z.object({ ...stepFields, status: z.literal('skipped'), reason: SkipReason }),
    z.object({
      ...stepFields,
      status: z.enum(STEP_STATUSES.filter((s): s is Exclude<(typeof STEP_STATUSES)[number], 'skipped'> => s !== 'skipped')),
      reason: z.string().nullable().meta({
        description: 'With `failed`: why, e.g. `no_balance`, `unreachable`, `no_result`, or the sender\'s own reason; with `sent`: `undelivered: <reason>` after a negative delivery receipt; with `scheduled`: `send_window` while the step waits for the recipient\'s send window to open (it goes out at `dueAt`); otherwise null.',
      }),
    }),
  ])
  .meta({ id: 'CascadeStep', description: 'A step of a recipient. Its `status` is a StepStatus; a `skipped` step has a SkipReason.' });

export const RecipientJson = z.object({
  id: z.string(),
  name: z.string().nullable(),
  email: z.string().nullable(),
  phone: z.string().nullable(),
  externalId: z.string().nullable().meta({ description: "The contact's externalId, for recipients that came from POST /contacts." }),
  status: RecipientStatus,
  finishReason: FinishReason.nullable().meta({ description: 'Why the recipient finished; null while running.' }),
  rating: z.number().int().nullable(),
  feedback: z.string().nullable(),
  ratedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  windowClosesAt: z.string().nullable().meta({ description: 'While `waiting` (its last step went out): when the response window closes and the recipient finishes `exhausted` unless it rates; otherwise null.' }),
  steps: z.array(StepJson),
});

/** A cascade's `counts`: GET /cascades/{id} and each item of GET /cascades. */
const CascadeCounts = z
  .object(Object.fromEntries(CASCADE_COUNT_KEYS.map((k) => [k, z.number().int()])) as Record<CascadeCountKey, z.ZodNumber>)
  .meta({ description: 'Every key always present (docs/cascades.md, "counts keys").' });

export const GetCascadeResponse = z.object({
  id: z.string(),
  status: CascadeStatus,
  externalId: z.string().nullable(),
  counts: CascadeCounts,
  recipients: z.array(RecipientJson),
});

export const EXAMPLE_START_RESPONSE = {
  id: EXAMPLE_IDS.cascade,
  status: 'running',
  queued: 1,
  skipped: 0,
  flow: { id: EXAMPLE_IDS.flow, name: 'Email, then SMS a day later', steps: EXAMPLE_FLOW_STEPS },
};

export const EXAMPLE_CASCADE = {
  id: EXAMPLE_IDS.cascade,
  status: 'running',
  externalId: 'order-1042',
  counts: {
    recipients: 2, queued: 1, skipped: 1, running: 1, waiting: 0, finished: 1, rated: 0, exhausted: 0, unreachable: 1, unsubscribed: 0, canceled: 0, cooldown: 0, noConsent: 0,
    opened: 1, feedback: 0, stepsSent: 1, stepsFailed: 0, stepsSkipped: 2, stepsPending: 1, stepsDelivered: 0, stepsUndelivered: 0,
  } satisfies Record<CascadeCountKey, number>,
  recipients: [
    {
      id: EXAMPLE_IDS.recipient, name: 'Anna', email: 'anna@example.com', phone: '+79161234567', externalId: 'crm-1042', status: 'running', finishReason: null,
      rating: null, feedback: null, ratedAt: null, finishedAt: null, windowClosesAt: null,
      steps: [
        { order: 1, channel: 'EMAIL', status: 'sent', dueAt: '2026-05-01T12:00:00.000Z', sentAt: '2026-05-01T12:00:01.200Z', skippedAt: null, deliveredAt: null, provider: 'smtp', delivery: 'unknown', reason: null, reroute: null },
        { order: 2, channel: 'SMS', status: 'scheduled', dueAt: '2026-05-02T12:00:01.200Z', sentAt: null, skippedAt: null, deliveredAt: null, provider: null, delivery: null, reason: null, reroute: null },
      ],
    },
    {
      id: '0190e0e0-5555-7000-8000-000000000006', name: 'Boris', email: null, phone: null, externalId: null, status: 'finished', finishReason: 'unreachable',
      rating: null, feedback: null, ratedAt: null, finishedAt: '2026-05-01T12:00:00.000Z', windowClosesAt: null,
      steps: [
        { order: 1, channel: 'EMAIL', status: 'skipped', dueAt: null, sentAt: null, skippedAt: '2026-05-01T12:00:00.000Z', deliveredAt: null, provider: null, delivery: null, reason: 'no_contact', reroute: null },
        { order: 2, channel: 'SMS', status: 'skipped', dueAt: null, sentAt: null, skippedAt: '2026-05-01T12:00:00.000Z', deliveredAt: null, provider: null, delivery: null, reason: 'no_contact', reroute: null },
      ],
    },
  ],
};

export function startCascadeJson(r: schedulerV1.StartCascadeResponse) {
  const flow = r.flow!;
  return {
    id: r.id,
    status: r.status,
    queued: r.queued,
    skipped: r.skipped,
    flow: { id: orNull(flow.id), name: flow.name, steps: flow.steps.map(flowStepJson) },
  };
}

export function cascadeJson(c: schedulerV1.Cascade) {
  const counts = Object.fromEntries(CASCADE_COUNT_KEYS.map((k) => [k, 0])) as Record<string, number>;
  for (const { key, value } of c.counts) if (key in counts) counts[key] = value;
  return {
    id: c.id,
    status: c.status,
    externalId: c.hasExternalId ? c.externalId : null,
    counts,
    recipients: c.recipients.map((r) => ({
      id: r.id,
      name: orNull(r.name),
      email: orNull(r.email),
      phone: orNull(r.phone),
      externalId: orNull(r.contactExternalId),
      status: r.status,
      finishReason: orNull(r.finishReason),
      rating: r.rating === 0 ? null : r.rating,
      feedback: orNull(r.feedback),
      ratedAt: isoOrNull(r.ratedAt),
      finishedAt: isoOrNull(r.finishedAt),
      windowClosesAt: isoOrNull(r.windowClosesAt),
      steps: r.steps.map((s) => ({
        order: s.order,
        channel: s.channel,
        status: s.status,
        dueAt: isoOrNull(s.dueAt),
        sentAt: isoOrNull(s.sentAt),
        skippedAt: isoOrNull(s.skippedAt),
        deliveredAt: isoOrNull(s.deliveredAt),
        provider: orNull(s.provider),
        delivery: stepDelivery(s),
        reason: orNull(s.reason),
        reroute: s.reroutes.length
          ? { to: s.sentChannel, hops: s.reroutes.map((x) => ({ from: x.fromChannel, to: x.toChannel, reason: x.reason })) }
          : null,
      })),
    })),
  };
}

/** POST /api/v1/cascades and GET /api/v1/cascades/{id}. */
export function cascadeRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/cascades',
      operationId: 'startCascade',
      summary: 'Start a cascade',
      description:
        `Puts 1 to ${MAX_RECIPIENTS_PER_REQUEST} recipients into a flow (or a one-step cascade in \`channel\`) and answers at once; steps run in the background. ` +
        'Step 1 goes at once; each later step goes `delayMinutes` after the last step actually sent, unless the recipient has rated. ' +
        'A recipient with no usable contact for any step is counted in `skipped`.',
      tags: ['cascades'],
      auth: 'apiKey',
      scope: 'cascades:write',
      rateLimited: true,
      sends: true,
      recipients: ({ body }) => body.recipients.length,
      request: { body: StartCascadeBody },
      responses: { 202: { description: 'The cascade was created; its steps run in the background.', body: StartCascadeResponse, example: EXAMPLE_START_RESPONSE } },
      errors: [404, 'channel_not_configured'],
      example: { body: { locationId: EXAMPLE_IDS.location, externalId: 'order-1042', recipients: [{ name: 'Anna', email: 'anna@example.com', phone: '+7 916 123-45-67' }] } },
      handler: async ({ body, principal, metadata }) => {
        const r = await startCascade(clients, { organizationId: principal.organization.id, ...body }, metadata);
        return { body: startCascadeJson(r), replayed: r.idempotentReplayed, recipientBudget: r.recipientBudget };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/cascades/{id}',
      operationId: 'getCascade',
      summary: 'Read a cascade',
      description: 'The cascade with each recipient, the status of each of its steps, and the rating and feedback when given. The status and reason values are the enums of this document (CascadeStatus, RecipientStatus, FinishReason, StepStatus, SkipReason, RerouteReason); what they mean and the `counts` keys: docs/cascades.md.',
      tags: ['cascades'],
      auth: 'apiKey',
      scope: 'cascades:read',
      rateLimited: true,
      request: { params: z.object({ id: z.string().max(64) }) },
      responses: { 200: { description: 'The cascade.', body: GetCascadeResponse, example: EXAMPLE_CASCADE } },
      example: { params: { id: EXAMPLE_IDS.cascade } },
      handler: async ({ params, principal, metadata }) => {
        const r = await clients.scheduler.getCascade({ organizationId: principal.organization.id, id: params.id }, { metadata });
        return { body: cascadeJson(r.cascade!) };
      },
    }),
  ];
}

const countsObject = (counts: schedulerV1.CascadeCount[]) => {
  const out = Object.fromEntries(CASCADE_COUNT_KEYS.map((k) => [k, 0])) as Record<string, number>;
  for (const { key, value } of counts) if (key in out) out[key] = value;
  return out as Record<CascadeCountKey, number>;
};

const CascadeSummaryJson = z
  .object({
    id: z.string(),
    status: CascadeStatus,
    externalId: z.string().nullable(),
    locationId: z.string(),
    createdAt: z.string(),
    finishedAt: z.string().nullable().meta({ description: 'When its last recipient finished; null while running.' }),
    counts: CascadeCounts,
  })
  .meta({ id: 'CascadeSummary', description: 'A cascade as GET /cascades lists it: its `counts` are those GET /cascades/{id} shows.' });

const ListCascadesResponse = z.object({
  cascades: z.array(CascadeSummaryJson),
  nextCursor: z.string().nullable().meta({ description: 'Pass as `cursor` for the next page; null on the last page.' }),
});

const EXAMPLE_CANCELED_CASCADE = {
  ...EXAMPLE_CASCADE,
  status: 'finished',
  counts: { ...EXAMPLE_CASCADE.counts, running: 0, finished: 2, canceled: 1, stepsPending: 0 },
  recipients: [
    {
      ...EXAMPLE_CASCADE.recipients[0], status: 'finished', finishReason: 'canceled', finishedAt: '2026-05-01T12:30:00.000Z',
      steps: [EXAMPLE_CASCADE.recipients[0].steps[0], { ...EXAMPLE_CASCADE.recipients[0].steps[1], status: 'canceled' }],
    },
    EXAMPLE_CASCADE.recipients[1],
  ],
};

const CancelByExternalIdBody = z.strictObject({
  externalId: z.string().min(1).max(200).meta({ description: 'The `externalId` the cascades were started with (exact).' }),
});

/**
 * GET /api/v1/cascades, POST /api/v1/cascades/{id}/cancel and POST /api/v1/cascades/cancel: how an
 * integrator finds its cascades again and stops them (docs/api-conventions.md, "Lists and cursors",
 * "Canceling").
 */
export function cascadeLookupRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/cascades',
      operationId: 'listCascades',
      summary: 'List cascades',
      description:
        'The organization\'s cascades, newest first, one page at a time; filter by `externalId` to find the cascade of an order. Pages follow `nextCursor`: cascades created while you page ' +
        'come before the first page, never inside a later one, so a walk through the pages lists every cascade that existed when it began exactly once.',
      tags: ['cascades'],
      auth: 'apiKey',
      scope: 'cascades:read',
      rateLimited: true,
      request: {
        query: z.object({
          externalId: z.string().min(1).max(200).optional().meta({ description: 'Only the cascades started with this `externalId` (exact).' }),
          status: CascadeStatus.optional(),
          locationId: z.string().min(1).max(64).optional().meta({ description: 'Only the cascades into this location.' }),
          createdFrom: z.iso.datetime({ offset: true }).optional().meta({ description: 'Only cascades created at or after this time (ISO 8601 with an offset, or Z).', examples: ['2026-05-01T00:00:00Z'] }),
          createdTo: z.iso.datetime({ offset: true }).optional().meta({ description: 'Only cascades created before this time.', examples: ['2026-06-01T00:00:00Z'] }),
          limit: z.coerce.number().int().min(1).max(MAX_CASCADE_PAGE).optional().meta({ description: `Page size, 1 to ${MAX_CASCADE_PAGE} (default 50).` }),
          cursor: cursorParameter('cascades', '`nextCursor` of the previous page.', encodeCursor('cascades', EXAMPLE_IDS.cascade)),
        }),
      },
      responses: {
        200: {
          description: 'One page of cascades.',
          body: ListCascadesResponse,
          example: {
            cascades: [{ id: EXAMPLE_IDS.cascade, status: 'running', externalId: 'order-1042', locationId: EXAMPLE_IDS.location, createdAt: '2026-05-01T12:00:00.000Z', finishedAt: null, counts: EXAMPLE_CASCADE.counts }],
            nextCursor: encodeCursor('cascades', EXAMPLE_IDS.cascade),
          },
        },
      },
      example: { query: { externalId: 'order-1042', status: 'running', locationId: EXAMPLE_IDS.location, limit: '20', cursor: encodeCursor('cascades', EXAMPLE_IDS.cascade) } },
      handler: async ({ query, principal, metadata }) => {
        const r = await clients.scheduler.listCascades(
          {
            organizationId: principal.organization.id, externalId: query.externalId ?? '', status: query.status ?? '', limit: query.limit ?? 0, after: query.cursor ?? '',
            locationId: query.locationId ?? '', fromDay: '', toDay: '', timeZone: '',
            createdFrom: query.createdFrom ? new Date(query.createdFrom) : undefined, createdTo: query.createdTo ? new Date(query.createdTo) : undefined, withCounts: true,
          },
          { metadata },
        );
        return {
          body: {
            cascades: r.cascades.map((c) => ({
              id: c.id, status: c.status as z.infer<typeof CascadeStatus>, externalId: c.hasExternalId ? c.externalId : null, locationId: c.locationId,
              createdAt: c.createdAt!.toISOString(), finishedAt: isoOrNull(c.finishedAt), counts: countsObject(c.counts),
            })),
            nextCursor: r.nextAfter ? encodeCursor('cascades', r.nextAfter) : null,
          },
        };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/cascades/{id}/cancel',
      operationId: 'cancelCascade',
      summary: 'Cancel a cascade',
      description:
        'Stops a cascade (an order refunded or returned): every recipient not finished yet finishes with `finishReason` `canceled`, no later step is sent, its `cascade.recipient.finished` event goes out ' +
        'with reason `canceled`, and its review link shows "this request is no longer active" and takes no rating. A step already handed to a sender (`dispatched`) is not recalled. ' +
        'Recipients that finished before keep their outcome. Idempotent: canceling again changes nothing and answers the same. Answers the cascade as GET /cascades/{id} shows it.',
      tags: ['cascades'],
      auth: 'apiKey',
      scope: 'cascades:write',
      rateLimited: true,
      request: { params: z.object({ id: z.string().max(64) }) },
      responses: { 200: { description: 'The cascade, canceled.', body: GetCascadeResponse, example: EXAMPLE_CANCELED_CASCADE } },
      example: { params: { id: EXAMPLE_IDS.cascade } },
      handler: async ({ params, principal, metadata }) => {
        const r = await clients.scheduler.cancelCascade({ organizationId: principal.organization.id, id: params.id }, { metadata });
        return { body: cascadeJson(r.cascade!), replayed: r.idempotentReplayed };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/cascades/cancel',
      operationId: 'cancelCascadesByExternalId',
      summary: 'Cancel the cascades of an externalId',
      description:
        'Cancels, as POST /cascades/{id}/cancel does, every running cascade of the organization started with this `externalId` (every request made for an order). ' +
        'Answers the ids it canceled; none (an empty list) is not an error, and a repeat answers an empty list.',
      tags: ['cascades'],
      auth: 'apiKey',
      scope: 'cascades:write',
      rateLimited: true,
      request: { body: CancelByExternalIdBody },
      responses: {
        200: {
          description: 'The cascades this request canceled, oldest first.',
          body: z.object({ canceled: z.array(z.string()) }),
          example: { canceled: [EXAMPLE_IDS.cascade] },
        },
      },
      example: { body: { externalId: 'order-1042' } },
      handler: async ({ body, principal, metadata }) => {
        const r = await clients.scheduler.cancelCascadesByExternalId({ organizationId: principal.organization.id, externalId: body.externalId }, { metadata });
        return { body: { canceled: r.canceled }, replayed: r.idempotentReplayed };
      },
    }),
  ];
}
