import { z } from 'zod';
import { CASCADE_COUNT_KEYS, MAX_RECIPIENTS_PER_REQUEST, type CascadeCountKey, type schedulerV1 } from '@rrs/proto';
import { defineRoute, type Route } from '../http/route';
import { startCascade } from '../useCases/cascades';
import type { PublicRouteDeps } from './deps';
import { FlowStepJson, flowStepJson, isoOrNull, orNull } from './shapes';

const Recipient = z.strictObject({
  name: z.string().max(200).optional(),
  email: z.email().max(254).optional(),
  phone: z.string().max(64).optional().meta({ description: "Any format; normalized to E.164 (numbers without a country code are read in the organization's region)." }),
});

const StartCascadeBody = z
  .strictObject({
    locationId: z.string().min(1).max(64).meta({ description: 'An id from GET /locations; an unknown one is 404.' }),
    name: z.string().max(200).optional().meta({ description: 'Name of the mailing, for history.' }),
    flowId: z.string().min(1).max(64).optional().meta({ description: "Default: the organization's default flow. Mutually exclusive with `channel`." }),
    channel: z.enum(['EMAIL', 'SMS', 'MAX', 'TELEGRAM']).optional().meta({ description: 'A one-step cascade in this channel. Mutually exclusive with `flowId`.' }),
    externalId: z.string().max(200).optional().meta({ description: 'Your id (order number, deal id); returned in GET /cascades/{id} and in the finish event.' }),
    recipients: z.array(Recipient).min(1, `1 to ${MAX_RECIPIENTS_PER_REQUEST} recipients`).max(MAX_RECIPIENTS_PER_REQUEST, `at most ${MAX_RECIPIENTS_PER_REQUEST} recipients per request`),
  })
  .superRefine((b, ctx) => {
    if (b.flowId !== undefined && b.channel !== undefined) ctx.addIssue({ code: 'custom', path: ['channel'], message: 'flowId and channel are mutually exclusive' });
  });

const StartCascadeResponse = z.object({
  id: z.string(),
  status: z.string().meta({ description: '`running`, or `finished` when every recipient was skipped.' }),
  queued: z.number().int().meta({ description: 'Recipients put in the queue.' }),
  skipped: z.number().int().meta({ description: 'Recipients with no usable contact for any step of the flow.' }),
  flow: z.object({
    id: z.string().nullable().meta({ description: 'null for a one-step `channel` cascade.' }),
    name: z.string(),
    steps: z.array(FlowStepJson),
  }),
});

const Reroute = z
  .object({
    to: z.string().meta({ description: 'The channel the step finally went through.' }),
    hops: z.array(z.object({ from: z.string(), to: z.string(), reason: z.string().meta({ description: '`no_balance`, `unreachable` or `channel_not_configured`.' }) })),
  })
  .nullable();

const StepJson = z.object({
  order: z.number().int(),
  channel: z.string(),
  status: z.string().meta({ description: '`pending`, `scheduled`, `dispatched`, `sent`, `failed`, `skipped` or `canceled`.' }),
  dueAt: z.string().nullable(),
  sentAt: z.string().nullable(),
  skippedAt: z.string().nullable(),
  reason: z.string().nullable().meta({ description: 'Why the step was skipped (`no_contact`, `opted_out`, `channel_not_configured`) or failed.' }),
  reroute: Reroute,
});

const RecipientJson = z.object({
  id: z.string(),
  name: z.string().nullable(),
  email: z.string().nullable(),
  phone: z.string().nullable(),
  externalId: z.string().nullable().meta({ description: "The contact's externalId, for recipients that came from POST /contacts." }),
  status: z.string().meta({ description: '`running` or `finished`.' }),
  finishReason: z.string().nullable().meta({ description: '`rated`, `exhausted`, `unreachable`, `unsubscribed` or `canceled`; null while running.' }),
  rating: z.number().int().nullable(),
  feedback: z.string().nullable(),
  ratedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  steps: z.array(StepJson),
});

const GetCascadeResponse = z.object({
  id: z.string(),
  status: z.string().meta({ description: '`running`, then `finished` once every recipient has finished.' }),
  externalId: z.string().nullable(),
  counts: z.object(Object.fromEntries(CASCADE_COUNT_KEYS.map((k) => [k, z.number().int()])) as Record<CascadeCountKey, z.ZodNumber>),
  recipients: z.array(RecipientJson),
});

function startCascadeJson(r: schedulerV1.StartCascadeResponse) {
  const flow = r.flow!;
  return {
    id: r.id,
    status: r.status,
    queued: r.queued,
    skipped: r.skipped,
    flow: { id: orNull(flow.id), name: flow.name, steps: flow.steps.map(flowStepJson) },
  };
}

function cascadeJson(c: schedulerV1.Cascade) {
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
      steps: r.steps.map((s) => ({
        order: s.order,
        channel: s.channel,
        status: s.status,
        dueAt: isoOrNull(s.dueAt),
        sentAt: isoOrNull(s.sentAt),
        skippedAt: isoOrNull(s.skippedAt),
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
      request: { body: StartCascadeBody },
      responses: { 202: { description: 'The cascade was created; its steps run in the background.', body: StartCascadeResponse } },
      errors: [404, 'channel_not_configured'],
      example: { body: { locationId: 'loc_1', externalId: 'order-1042', recipients: [{ name: 'Anna', email: 'anna@example.com', phone: '+7 916 123-45-67' }] } },
      handler: async ({ body, principal, metadata }) => {
        const r = await startCascade(clients, { organizationId: principal.organization.id, ...body }, metadata);
        return { body: startCascadeJson(r), replayed: r.idempotentReplayed };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/cascades/{id}',
      operationId: 'getCascade',
      summary: 'Read a cascade',
      description: 'The cascade with each recipient, the status of each of its steps, and the rating and feedback when given. Status values and `counts` keys: see the docs (cascades.md).',
      tags: ['cascades'],
      auth: 'apiKey',
      scope: 'cascades:read',
      rateLimited: true,
      request: { params: z.object({ id: z.string().max(64) }) },
      responses: { 200: { description: 'The cascade.', body: GetCascadeResponse } },
      example: { params: { id: '0190e0e0-0000-7000-8000-000000000001' } },
      handler: async ({ params, principal, metadata }) => {
        const r = await clients.scheduler.getCascade({ organizationId: principal.organization.id, id: params.id }, { metadata });
        return { body: cascadeJson(r.cascade!) };
      },
    }),
  ];
}
