/**
 * Starting cascades, as more than one public route does it: POST /cascades, the channel send methods
 * and POST /contacts with `startCascade`. Calls to the scheduler only; it owns every rule.
 */
import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY } from '@rrs/idempotency';
import type { contactsV1, schedulerV1 } from '@rrs/proto';
import type { GatewayClients } from '../clients';

export interface CascadeRecipientInput {
  name?: string;
  email?: string;
  phone?: string;
  /** Set for the recipient of a contact's cascade. */
  contactId?: string;
  contactExternalId?: string;
  /** ISO 8601 date-time, or the contact's stored consent. */
  consentAt?: string | Date;
}

export interface CascadeStartInput {
  organizationId: string;
  locationId: string;
  /** Name of the mailing, for history. */
  name?: string;
  /** Unset = the organization's default flow, unless `channel` asks for a one-step cascade. */
  flowId?: string;
  channel?: string;
  externalId?: string;
  recipients: CascadeRecipientInput[];
  ignoreCooldown?: boolean;
  /** Check everything a start checks, and create nothing. */
  dryRun?: boolean;
}

/** StartCascade with the request's metadata (request id, Idempotency-Key and fingerprint). */
export function startCascade(clients: Pick<GatewayClients, 'scheduler'>, input: CascadeStartInput, metadata: Record<string, string>): Promise<schedulerV1.StartCascadeResponse> {
  return clients.scheduler.startCascade(
    {
      organizationId: input.organizationId,
      locationId: input.locationId,
      name: input.name ?? '',
      flowId: input.flowId ?? '',
      channel: input.channel ?? '',
      externalId: input.externalId ?? '',
      recipients: input.recipients.map((r) => ({
        name: r.name ?? '', email: r.email ?? '', phone: r.phone ?? '', contactId: r.contactId ?? '', contactExternalId: r.contactExternalId ?? '',
        consentAt: r.consentAt === undefined ? undefined : new Date(r.consentAt),
      })),
      ignoreCooldown: input.ignoreCooldown ?? false,
      dryRun: input.dryRun ?? false,
      contact: undefined,
      contactIdempotencyKey: '',
      contactIdempotencyFingerprint: '',
    },
    { metadata },
  );
}

/**
 * POST /contacts with `startCascade: true`: one StartCascade with the contact, which the scheduler saves
 * (contacts' UpsertContact) and then places in its cascade (services/cascade-scheduler/src/contactCascade.ts).
 * The contact and the cascade belong to two services, so each writes its own Idempotency-Key record in
 * its own transaction: the contact's under the request's key, the cascade's under the request's key
 * suffixed `:cascade` (same fingerprint). A retry replays the saved contact and then the saved cascade:
 * never a second contact nor a second cascade; a retry after a failed cascade start replays the contact
 * and starts the cascade.
 */
export function startContactCascade(
  clients: Pick<GatewayClients, 'scheduler'>,
  contact: Omit<contactsV1.UpsertContactRequest, 'startCascade'>,
  cascade: { flowId: string; externalId: string; ignoreCooldown: boolean },
  metadata: Record<string, string>,
): Promise<schedulerV1.StartCascadeResponse> {
  return clients.scheduler.startCascade(
    {
      organizationId: contact.organizationId, locationId: '', name: '', flowId: cascade.flowId, channel: '', externalId: cascade.externalId, recipients: [],
      ignoreCooldown: cascade.ignoreCooldown, dryRun: false,
      contact: { ...contact, startCascade: true }, contactIdempotencyKey: metadata[MD_IDEMPOTENCY_KEY] ?? '', contactIdempotencyFingerprint: metadata[MD_IDEMPOTENCY_FINGERPRINT] ?? '',
    },
    { metadata: cascadeMetadataOf(metadata) },
  );
}

/** The request's metadata with the cascade's Idempotency-Key: the request's, suffixed `:cascade`. */
export function cascadeMetadataOf(metadata: Record<string, string>): Record<string, string> {
  const md = { ...metadata };
  if (md[MD_IDEMPOTENCY_KEY]) md[MD_IDEMPOTENCY_KEY] = `${md[MD_IDEMPOTENCY_KEY]}:cascade`;
  return md;
}
