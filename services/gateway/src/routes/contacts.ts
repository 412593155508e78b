import { z } from 'zod';
import type { contactsV1 } from '@rrs/proto';
import { defineRoute, type Route } from '../http/route';
import { startContactCascade } from '../useCases/cascades';
import type { PublicRouteDeps } from './deps';
import { CascadeStatus } from './enums';
import { EXAMPLE_IDS, IgnoreCooldown } from './shapes';

/*
 * POST /api/v1/contacts. The contacts service owns every rule (E.164 phones with the organization's
 * region, attribute bounds, the location, upsert by externalId, the Idempotency-Key record); the schema
 * here documents the shape and refuses what is malformed before any call. For the fields below, an
 * absent field keeps the stored value and null clears it.
 */
const ContactBody = z.strictObject({
  externalId: z.string().max(200).nullable().optional().meta({ description: 'Your id of the customer; the deduplication key within the organization. Without it every call creates a new contact.' }),
  name: z.string().max(200).nullable().optional(),
  email: z.email().max(254).nullable().optional(),
  phone: z.string().max(64).nullable().optional().meta({ description: "Any format; normalized to E.164. Numbers without a country code are read in the organization's default region." }),
  locationId: z.string().max(64).nullable().optional().meta({ description: 'An id from GET /locations; an unknown one is 404.' }),
  consentAt: z.iso.datetime({ offset: true }).nullable().optional().meta({ description: 'ISO 8601 date-time with an offset (or Z).' }),
  attributes: z.record(z.string(), z.unknown()).nullable().optional().meta({ description: 'Your own fields: a JSON object of at most 50 keys and 8 KB; replaces the stored attributes.' }),
  startCascade: z.boolean().default(false).meta({ description: "Also place the contact in a cascade (the organization's default flow, or `flowId`)." }),
  flowId: z.string().max(64).optional().meta({
    description: "The flow of the cascade started with `startCascade: true` (default: the organization's default flow). Without `startCascade` it is accepted and ignored: not checked, not stored.",
  }),
  ignoreCooldown: IgnoreCooldown,
});

const Contact = z.object({
  id: z.string(),
  externalId: z.string().nullable(),
  name: z.string().nullable(),
  email: z.string().nullable(),
  phone: z.string().nullable().meta({ description: 'E.164.' }),
  locationId: z.string().nullable(),
  consentAt: z.string().nullable(),
  attributes: z.record(z.string(), z.unknown()),
  createdAt: z.string(),
  updatedAt: z.string(),
});
const UpsertContactResponse = z.object({
  contact: Contact,
  cascade: z
    .object({
      id: z.string().meta({ description: 'Read it with GET /cascades/{id}.' }),
      status: CascadeStatus,
      queued: z.number().int().meta({ description: '1 when the contact was put in the queue, 0 when skipped.' }),
      skipped: z.number().int().meta({ description: '1 when the contact has no usable email or phone for any step of the flow.' }),
    })
    .nullable()
    .meta({ description: 'The cascade started with `startCascade`, else null.' }),
});

const EXAMPLE_RESPONSE = {
  contact: {
    id: EXAMPLE_IDS.contact, externalId: 'crm-1042', name: 'Anna', email: 'anna@example.com', phone: '+79161234567', locationId: EXAMPLE_IDS.location,
    consentAt: '2026-05-01T09:00:00.000Z', attributes: { orderId: 'A-77' }, createdAt: '2026-05-01T09:00:00.000Z', updatedAt: '2026-05-01T09:00:00.000Z',
  },
  cascade: { id: EXAMPLE_IDS.cascade, status: 'running', queued: 1, skipped: 0 },
};

type Nullable<T> = T | null | undefined;
/** undefined = keep (absent from the gRPC request), null = clear (''), a value = set. */
const presence = (v: Nullable<string>): string | undefined => (v === undefined ? undefined : v ?? '');

function contactJson(c: contactsV1.Contact) {
  return {
    id: c.id,
    externalId: c.externalId ?? null,
    name: c.name ?? null,
    email: c.email ?? null,
    phone: c.phone ?? null,
    locationId: c.locationId ?? null,
    consentAt: c.consentAt ? c.consentAt.toISOString() : null,
    attributes: JSON.parse(c.attributesJson || '{}') as Record<string, unknown>,
    createdAt: c.createdAt!.toISOString(),
    updatedAt: c.updatedAt!.toISOString(),
  };
}

const PHONE_NOT_ALLOWED = {
  status: 400,
  code: 'phone_not_allowed',
  description:
    "The phone is a number the phone channels (SMS, MAX, TELEGRAM) never send to, and nothing is saved: `reason` `number_type` (premium-rate, shared-cost, toll-free, UAN, VoIP, pager, voicemail… — `numberType` names it), `international_network` (satellite or global-service codes such as +881, +882), or `country` (outside the organization's allowed countries, by default its region; `allowedCountries` lists them).",
};

export function contactRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/contacts',
      operationId: 'upsertContact',
      summary: 'Create or update a contact',
      description:
        'Creates a contact, or updates the one with the same `externalId` in the organization (fields left out keep their value; null clears one). ' +
        'One call per "order closed" event. With `startCascade: true` the contact is also placed in a cascade of one recipient at its location ' +
        "(`flowId`, or the organization's default flow); the contact must then have a location (sent or stored), else 400 naming `/locationId`. " +
        'An unknown `flowId` (or no default flow) is 404 and saves nothing. Without `startCascade`, a `flowId` is accepted and ignored (a CRM may always send its flow id). A retry with the same Idempotency-Key replays the saved contact and cascade ' +
        '(`Idempotent-Replayed: true` only when both were replayed) and creates neither a second contact nor a second cascade.',
      tags: ['contacts'],
      auth: 'apiKey',
      scope: 'contacts:write',
      rateLimited: true,
      sends: ({ body }) => body.startCascade === true,
      recipients: ({ body }) => (body.startCascade === true ? 1 : 0),
      request: { body: ContactBody },
      responses: { 200: { description: 'The contact as stored.', body: UpsertContactResponse, example: EXAMPLE_RESPONSE } },
      errors: [404, PHONE_NOT_ALLOWED],
      example: {
        body: { externalId: 'crm-1042', name: 'Anna', email: 'anna@example.com', phone: '+7 916 123-45-67', locationId: EXAMPLE_IDS.location, consentAt: '2026-05-01T12:00:00+03:00', attributes: { orderId: 'A-77' }, startCascade: true },
      },
      handler: async ({ body, principal, metadata }) => {
        const organizationId = principal.organization.id;
        const contact: Omit<contactsV1.UpsertContactRequest, 'startCascade'> = {
          organizationId,
          externalId: body.externalId ?? undefined,
          name: presence(body.name),
          email: presence(body.email),
          phone: presence(body.phone),
          locationId: presence(body.locationId),
          consentAt: presence(body.consentAt),
          attributesJson: body.attributes === undefined ? undefined : JSON.stringify(body.attributes ?? {}),
          // Without startCascade a flowId is ignored (docs/directory.md): contacts never sees it.
          flowId: body.startCascade ? body.flowId ?? '' : '',
        };
        if (!body.startCascade) {
          const r = await clients.contacts.upsertContact({ ...contact, startCascade: false }, { metadata });
          return { body: { contact: contactJson(r.contact!), cascade: null }, replayed: r.idempotentReplayed };
        }
        // One call: the scheduler saves the contact and starts its cascade, refused before the contact is saved.
        const cascade = await startContactCascade(clients, contact, { flowId: body.flowId ?? '', externalId: body.externalId ?? '', ignoreCooldown: body.ignoreCooldown ?? false }, metadata);
        return {
          body: { contact: contactJson(cascade.contact!), cascade: { id: cascade.id, status: cascade.status, queued: cascade.queued, skipped: cascade.skipped } },
          replayed: cascade.contactReplayed && cascade.idempotentReplayed,
          recipientBudget: cascade.recipientBudget,
        };
      },
    }),
  ];
}
