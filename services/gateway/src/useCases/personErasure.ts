/**
 * Erasing a person, as the public API, the admin API and the console do it (docs/customer-respect.md,
 * "Erasure"). The scheduler reads the identifiers and records the request (`pending`, under the
 * caller's Idempotency-Key: nothing is recorded or erased when it refuses them); the contacts service
 * deletes the person's contacts; the scheduler then erases its own rows and marks the request `done`.
 * Synchronous: the answer is `done` unless a step failed, and a retry with the same Idempotency-Key
 * (or another request) finishes a `pending` one, every step being idempotent.
 */
import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY } from '@rrs/idempotency';
import type { PersonErasureStatus, schedulerV1 } from '@rrs/proto';
import type { GatewayClients } from '../clients';

export interface PersonErasureInput {
  organizationId: string;
  email?: string;
  phone?: string;
  contactExternalId?: string;
  /** `api:<key id>`, `member:<id>`, `admin`. */
  actor: string;
}

export interface PersonErasureView {
  id: string;
  status: PersonErasureStatus;
  requestedAt: string;
  doneAt: string | null;
}

export const erasureView = (erasure: schedulerV1.PersonErasure | undefined): PersonErasureView => ({
  id: erasure?.id ?? '',
  status: (erasure?.status ?? 'pending') as PersonErasureStatus,
  requestedAt: erasure?.requestedAt?.toISOString() ?? '',
  doneAt: erasure?.doneAt ? erasure.doneAt.toISOString() : null,
});

/** Only the first call carries the Idempotency-Key: the later ones are idempotent by themselves. */
function withoutIdempotency(metadata: Record<string, string>): Record<string, string> {
  const { [MD_IDEMPOTENCY_KEY]: _key, [MD_IDEMPOTENCY_FINGERPRINT]: _fingerprint, ...rest } = metadata;
  return rest;
}

export async function erasePerson(
  clients: Pick<GatewayClients, 'scheduler' | 'contacts'>,
  input: PersonErasureInput,
  metadata: Record<string, string>,
): Promise<{ erasure: PersonErasureView; replayed: boolean }> {
  const identifiers = { email: input.email ?? '', phone: input.phone ?? '', contactExternalId: input.contactExternalId ?? '' };
  const requested = await clients.scheduler.requestPersonErasure({ organizationId: input.organizationId, actor: input.actor, ...identifiers }, { metadata });
  if (requested.erasure?.status === 'done') return { erasure: erasureView(requested.erasure), replayed: requested.idempotentReplayed };
  const read = { email: requested.email, phone: requested.phone, contactExternalId: identifiers.contactExternalId.trim() };
  const rest = withoutIdempotency(metadata);
  const contacts = await clients.contacts.erasePersonContacts({ organizationId: input.organizationId, ...read }, { metadata: rest });
  const completed = await clients.scheduler.completePersonErasure({ organizationId: input.organizationId, id: requested.erasure!.id, ...read, addresses: contacts.addresses }, { metadata: rest });
  return { erasure: erasureView(completed.erasure), replayed: requested.idempotentReplayed };
}

export async function getPersonErasure(clients: Pick<GatewayClients, 'scheduler'>, organizationId: string, id: string, metadata: Record<string, string>): Promise<PersonErasureView> {
  const r = await clients.scheduler.getPersonErasure({ organizationId, id }, { metadata });
  return erasureView(r.erasure);
}
