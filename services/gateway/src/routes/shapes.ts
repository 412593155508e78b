/** JSON shapes more than one public resource answers with, and the conversions from gRPC values they share. */
import { z } from 'zod';
import type { schedulerV1 } from '@rrs/proto';
import { ChannelKey, PersonErasureStatus } from './enums';

export const FlowStepJson = z.object({
  order: z.number().int().meta({ description: '1-based position in the flow.' }),
  channel: ChannelKey,
  delayMinutes: z.number().int().meta({ description: 'Minutes after the last step actually sent to the recipient (step 1 goes at once).' }),
});

export const flowStepJson = (s: schedulerV1.FlowStep) => ({ order: s.order, channel: s.channel, delayMinutes: s.delayMinutes });

/** Example flow steps: an email at once, an SMS a day after it was sent. */
export const EXAMPLE_FLOW_STEPS = [
  { order: 1, channel: 'EMAIL', delayMinutes: 0 },
  { order: 2, channel: 'SMS', delayMinutes: 1440 },
];

/** Example ids of the documents (UUIDv7, as the services issue them). */
export const EXAMPLE_IDS = {
  organization: '0190e0e0-1111-7000-8000-000000000001',
  location: '0190e0e0-2222-7000-8000-000000000002',
  flow: '0190e0e0-3333-7000-8000-000000000003',
  cascade: '0190e0e0-4444-7000-8000-000000000004',
  recipient: '0190e0e0-5555-7000-8000-000000000005',
  contact: '0190e0e0-6666-7000-8000-000000000006',
  reviewRequest: '0190e0e0-7777-7000-8000-000000000007',
  erasure: '0190e0e0-8888-7000-8000-000000000008',
} as const;

/** A time as ISO 8601, null when unset. */
export const isoOrNull = (d: Date | undefined): string | null => (d ? d.toISOString() : null);

/** proto3 has no null for strings: '' means unset. */
export const orNull = (s: string): string | null => (s === '' ? null : s);

/** A recipient's consent (docs/customer-respect.md): organizations that require consent skip recipients without it (`no_consent`). */
export const ConsentAt = z.iso.datetime({ offset: true }).optional().meta({
  description: 'When the customer consented to communication (ISO 8601 with an offset, or Z). An organization with `requireConsent` skips recipients without it (`no_consent`).',
  examples: ['2026-05-01T12:00:00+03:00'],
});

/** The per-request way past the cooldown (docs/customer-respect.md). */
export const IgnoreCooldown = z.boolean().optional().meta({
  description: "Send even to people asked (or who rated) within the organization's cooldown (`cooldownDays`, default 30), for a genuinely new order. Default false: such recipients are skipped with reason `cooldown`.",
});

/**
 * Page cursors of the lists (GET /cascades, GET /ratings): opaque to callers, base64url of the list's
 * name and its position (`cascades:<the last id of the page>`, `ratings:<the last feed position>`), so
 * a cursor of one list is refused by another and a malformed one is a 400 naming the parameter.
 */
export type CursorKind = 'cascades' | 'ratings';

export function encodeCursor(kind: CursorKind, position: string): string {
  return Buffer.from(`${kind}:${position}`, 'utf8').toString('base64url');
}

const CURSOR_POSITIONS: Record<CursorKind, RegExp> = {
  cascades: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
  ratings: /^(0|[1-9][0-9]{0,14})$/,
};

/** The position a cursor of `kind` holds; undefined when it is not one. */
export function decodeCursor(kind: CursorKind, cursor: string): string | undefined {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) return undefined;
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const prefix = `${kind}:`;
  if (!text.startsWith(prefix)) return undefined;
  const position = text.slice(prefix.length);
  return CURSOR_POSITIONS[kind].test(position) ? position : undefined;
}

/** A cursor query parameter of `kind`'s list, validated to its position (a malformed one: 400 naming the parameter). */
export function cursorParameter(kind: CursorKind, description: string, example: string) {
  return z
    .string()
    .max(200)
    .refine((cursor) => decodeCursor(kind, cursor) !== undefined, { message: `not a cursor of ${kind === 'cascades' ? 'GET /cascades' : 'GET /ratings'}: pass a \`nextCursor\` it answered` })
    .transform((cursor) => decodeCursor(kind, cursor)!)
    .optional()
    .meta({ description, examples: [example] });
}

/* Erasure per person: the public API's, the admin API's and the console's routes answer alike (docs/customer-respect.md, "Erasure of a person"). */

/** The identifiers a person is erased by; the schema of the admin and console routes too. */
export const PersonErasureBody = z.strictObject({
  email: z.string().max(254).optional().meta({ description: 'The person\'s email (any case).' }),
  phone: z.string().max(64).optional().meta({ description: "The person's phone, any format; numbers without a country code are read in the organization's default region." }),
  contactExternalId: z.string().max(200).optional().meta({ description: 'The CRM id of the contact (`externalId` of POST /contacts, `contactExternalId` of a recipient).' }),
}).meta({ id: 'PersonErasureRequest', description: 'One or more of `email`, `phone`, `contactExternalId`: every record of the organization matching any of them, and every record sharing an address with those, is erased.' });

/** The 202 of an erasure request. */
export const PersonErasureAccepted = z.object({ id: z.string(), status: PersonErasureStatus });

export const PersonErasureJson = z.object({
  id: z.string(),
  status: PersonErasureStatus,
  requestedAt: z.string(),
  doneAt: z.string().nullable().meta({ description: 'When every service the erasure covers had erased the person; null while pending.' }),
}).meta({ id: 'PersonErasure' });

export const EXAMPLE_ERASURE: z.infer<typeof PersonErasureJson> = { id: EXAMPLE_IDS.erasure, status: 'done', requestedAt: '2026-05-02T09:00:00.000Z', doneAt: '2026-05-02T09:00:00.350Z' };
export const EXAMPLE_ERASURE_BODY: z.infer<typeof PersonErasureBody> = { email: 'anna@example.com', phone: '+7 916 123-45-67' };
export const ERASURE_DESCRIPTION =
  'Erases one person from the organization, in every service: their contacts (with the consent they carried), cascade recipients, step addresses, review requests and private feedback, the addresses in the senders\' send logs, the webhook events and deliveries about them, their CRM deals\' inbox events and written-back feedback, their bot chat links and the development inbox are deleted or irreversibly anonymized; ratings stay as anonymous numbers, so counts and statistics do not change; an opt-out stays as a keyed hash and still holds. ' +
  'The erasure runs while the request waits: the answer is normally `done`; a `pending` one is finished by a retry. `done` means the contacts and the cascades\' data are erased; the senders, webhooks and connectors erase theirs from the event the erasure publishes, within seconds while they run (docs/customer-respect.md, "Erasure in every service").';
