import type { Contact, UpsertContactRequest, UpsertContactResponse } from './gen/rrs/contacts/v1/contacts';
import type { StartCascadeRequest, StartCascadeResponse } from './gen/rrs/scheduler/v1/scheduler';

/*
 * "Save the contact and start its cascade", written once for everyone who does it: the gateway's
 * POST /contacts with `startCascade` and the CRM connectors' won deals. The contact (contacts) and the
 * cascade (cascade-scheduler) belong to two services, so no transaction holds both; the order makes a
 * refusal save nothing and a retry repeat nothing:
 *   1. the scheduler's dry run of the start (the one admission pre-check: the sending rule, the flow,
 *      the recipient budget — docs/architecture.md, "One door") refuses before the contact is saved;
 *   2. UpsertContact, under its own Idempotency-Key;
 *   3. StartCascade with the saved contact as the recipient, under the cascade's key.
 * Three gRPC calls. A retry replays the saved contact and the saved cascade (the dry run of a start
 * already saved under its key is admitted), or, after a start that failed, starts it. Between 1 and 3
 * the budget may be spent by another request: the contact is then saved and the start refused (429), and
 * the retry starts it.
 */

type Metadata = Record<string, string>;

/** The two calls it makes, as the services' promise clients have them (structural: any client with these methods). */
export interface ContactCascadeClients {
  contacts: { upsertContact(request: UpsertContactRequest, options: { metadata: Metadata }): Promise<UpsertContactResponse> };
  scheduler: { startCascade(request: StartCascadeRequest, options: { metadata: Metadata }): Promise<StartCascadeResponse> };
}

export interface ContactCascadeInput {
  /** The contact to save (`startCascade` is set: contacts then requires it to have a location). */
  contact: Omit<UpsertContactRequest, 'startCascade'>;
  cascade: { flowId: string; name: string; externalId: string; ignoreCooldown: boolean };
  /** Request metadata of each call: the contact's and the cascade's Idempotency-Key (and fingerprint). */
  contactMetadata: Metadata;
  cascadeMetadata: Metadata;
}

export interface ContactCascadeResult {
  contact: Contact;
  contactReplayed: boolean;
  cascade: StartCascadeResponse;
}

/** The saved contact as the cascade's recipient. */
const recipientOf = (contact: Contact) => ({
  name: contact.name ?? '', email: contact.email ?? '', phone: contact.phone ?? '', contactId: contact.id, contactExternalId: contact.externalId ?? '', consentAt: contact.consentAt,
});
/** The dry run's recipient: one, counted by the budget; its addresses are checked by contacts (step 2), as the contact's. */
const ONE_RECIPIENT = { name: '', email: '', phone: '', contactId: '', contactExternalId: '' };

export async function saveContactAndStartCascade(clients: ContactCascadeClients, input: ContactCascadeInput): Promise<ContactCascadeResult> {
  const { contact: wanted, cascade } = input;
  const start = (locationId: string, recipient: StartCascadeRequest['recipients'][number], dryRun: boolean): StartCascadeRequest => ({
    organizationId: wanted.organizationId,
    locationId,
    name: cascade.name,
    flowId: cascade.flowId,
    channel: '',
    externalId: cascade.externalId,
    recipients: [recipient],
    ignoreCooldown: cascade.ignoreCooldown,
    dryRun,
  });
  // The location is checked by contacts (step 2), which also knows a contact's stored one.
  await clients.scheduler.startCascade(start('', ONE_RECIPIENT, true), { metadata: input.cascadeMetadata });
  const saved = await clients.contacts.upsertContact({ ...wanted, startCascade: true }, { metadata: input.contactMetadata });
  const contact = saved.contact!;
  const started = await clients.scheduler.startCascade(start(contact.locationId!, recipientOf(contact), false), { metadata: input.cascadeMetadata });
  return { contact, contactReplayed: saved.idempotentReplayed, cascade: started };
}
