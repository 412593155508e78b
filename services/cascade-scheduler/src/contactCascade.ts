import type { IdempotencyRequest } from '@rrs/idempotency';
import type { contactsV1, schedulerV1 } from '@rrs/proto';
import { InvalidError, type FieldProblem } from '@rrs/runtime';
import type { ContactIdempotency } from './organizationProfiles';
import type { RecipientInput } from './recipientInput';
import { normalizeRecipients } from './recipientInput';
import { precheckStart, readStart, startAdmitted, type IntakeDeps, type StartCascadeInput, type StartCascadeResult } from './startCascade';

/*
 * "Save the contact and start its cascade", written once for everyone who does it: POST /contacts with
 * `startCascade` (the gateway) and the CRM connectors' won deals, both by one StartCascade with a
 * `contact`. The contact belongs to contacts and the cascade to the scheduler, so no transaction holds
 * both; the order makes a refusal save nothing and a retry repeat nothing:
 *   1. the organization's sending profile (one call to contacts), the flow and the admission pre-check
 *      of the dry run (the sending rule, the flow, the recipient budget as it is: nothing taken);
 *   2. contacts' UpsertContact under the contact's own Idempotency-Key (one call): contacts checks the
 *      contact and that it has a location, and answers that location;
 *   3. the start with the saved contact as its one recipient at that location, reusing what 1 and 2
 *      read, under the cascade's Idempotency-Key.
 * Two calls to contacts, none repeated. A retry replays the saved contact and the saved cascade (the
 * pre-check of a start already saved under its key admits it), or, after a start that failed, starts it.
 * Between 1 and 3 the budget may be spent by another request: the contact is then saved and the start
 * refused (429), and the retry starts it.
 */

export type ContactCascadeInput = StartCascadeInput & {
  contact: Omit<contactsV1.UpsertContactRequest, 'startCascade'>;
  contactIdempotency?: ContactIdempotency;
};

/** The saved contact as the cascade's recipient. */
function recipientOf(contact: contactsV1.Contact): RecipientInput {
  return { name: contact.name ?? '', email: contact.email ?? '', phone: contact.phone ?? '', contactId: contact.id, contactExternalId: contact.externalId ?? '', consentAt: contact.consentAt };
}

/** The pre-check's recipient: one, counted by the budget; its addresses are the contact's, checked by contacts (step 2). */
const ONE_RECIPIENT: RecipientInput = { name: '', email: '', phone: '', contactId: '', contactExternalId: '' };

function validateContactStart(input: ContactCascadeInput): void {
  const problems: FieldProblem[] = [];
  if (input.locationId) problems.push({ pointer: '/locationId', detail: "must be empty with a contact: the cascade runs at the contact's location" });
  if (input.recipients.length) problems.push({ pointer: '/recipients', detail: 'must be empty with a contact: the saved contact is the one recipient' });
  if (input.dryRun) problems.push({ pointer: '/dryRun', detail: 'a start with a contact has no dry run' });
  if (input.channel) problems.push({ pointer: '/channel', detail: "a contact's cascade runs a flow" });
  if (input.contact.organizationId !== input.organizationId) problems.push({ pointer: '/contact/organizationId', detail: "must be the start's organization" });
  if (problems.length) throw new InvalidError(problems);
}

/** StartCascade with a `contact`: the contact saved, then its cascade started (see above). */
export async function startContactCascade(deps: IntakeDeps, input: ContactCascadeInput, idempotency?: IdempotencyRequest): Promise<{ result: StartCascadeResult & Pick<schedulerV1.StartCascadeResponse, 'contact' | 'contactReplayed'>; replayed: boolean }> {
  validateContactStart(input);
  const { contact, contactIdempotency, ...start } = input;
  const precheck = { ...start, recipients: [ONE_RECIPIENT] };
  const read = await readStart(deps, precheck);
  await precheckStart(deps, precheck, read.profile, idempotency);
  const saved = await deps.profiles.saveContact(contact, contactIdempotency);
  const recipients = normalizeRecipients([recipientOf(saved.contact)], read.profile.organization.defaultRegion);
  const started = await startAdmitted(deps, { ...start, locationId: saved.location.id, recipients }, { ...read, location: saved.location }, idempotency);
  return { result: { ...started.result, contact: saved.contact, contactReplayed: saved.replayed }, replayed: started.replayed };
}
