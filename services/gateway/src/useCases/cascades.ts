/**
 * Starting cascades, as more than one public route does it: POST /cascades, the channel send methods
 * and POST /contacts with `startCascade`. Calls to the scheduler only; it owns every rule.
 */
import { MD_IDEMPOTENCY_KEY } from '@rrs/idempotency';
import type { schedulerV1 } from '@rrs/proto';
import type { GatewayClients } from '../clients';
import { checkSendingAllowed } from '../http/sending';
import { notFound } from '../http/errors';

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
    },
    { metadata },
  );
}

/**
 * What must hold before a contact is saved with `startCascade`, since the contact (contacts) and the
 * cascade (scheduler) cannot share a transaction: the sending rule on the organization as contacts holds
 * it now (the principal comes from the auth cache, up to its TTL stale, so a plan just set to trial never
 * reaches the scheduler), and the flow (`flowId`, or a default flow) exists. Refuses before anything is saved.
 */
export async function checkContactCascade(clients: Pick<GatewayClients, 'contacts' | 'scheduler'>, organizationId: string, flowId: string | undefined, metadata: Record<string, string>): Promise<void> {
  const { organization } = await clients.contacts.getOrganization({ id: organizationId }, { metadata });
  checkSendingAllowed(organization!);
  const { flows } = await clients.scheduler.listFlows({ organizationId }, { metadata });
  if (flowId !== undefined) {
    if (!flows.some((f) => f.id === flowId)) throw notFound(`flow ${flowId} not found`, { errors: [{ pointer: '/flowId', detail: 'no such flow in this organization' }] });
  } else if (!flows.some((f) => f.isDefault)) {
    throw notFound('the organization has no default flow; pass flowId', { errors: [{ pointer: '/flowId', detail: 'no default flow; pass flowId' }] });
  }
}

/**
 * The cascade of `POST /contacts` with `startCascade: true`, started after `UpsertContact` succeeded.
 * The contact and the cascade belong to two services, so no single transaction can hold both: each
 * service writes its own Idempotency-Key record in its own transaction, the cascade's under the
 * request's key suffixed `:cascade` (same fingerprint). A retry replays the saved contact and then the
 * saved cascade: never a second contact nor a second cascade; a retry after a failed cascade start
 * replays the contact and starts the cascade.
 */
export async function startContactCascade(
  clients: Pick<GatewayClients, 'scheduler'>,
  input: {
    organizationId: string; locationId: string; flowId?: string; ignoreCooldown?: boolean;
    contact: { id: string; externalId?: string; name?: string; email?: string; phone?: string; consentAt?: Date };
  },
  metadata: Record<string, string>,
): Promise<{ id: string; status: string; queued: number; skipped: number; replayed: boolean }> {
  const md = { ...metadata };
  if (md[MD_IDEMPOTENCY_KEY]) md[MD_IDEMPOTENCY_KEY] = `${md[MD_IDEMPOTENCY_KEY]}:cascade`;
  const { contact } = input;
  const r = await startCascade(
    clients,
    {
      organizationId: input.organizationId,
      locationId: input.locationId,
      flowId: input.flowId,
      externalId: contact.externalId,
      ignoreCooldown: input.ignoreCooldown,
      recipients: [{ name: contact.name, email: contact.email, phone: contact.phone, contactId: contact.id, contactExternalId: contact.externalId, consentAt: contact.consentAt }],
    },
    md,
  );
  return { id: r.id, status: r.status, queued: r.queued, skipped: r.skipped, replayed: r.idempotentReplayed };
}
