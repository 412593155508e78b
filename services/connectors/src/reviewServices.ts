import { createHash } from 'node:crypto';
import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY } from '@rrs/idempotency';
import type { contactsV1, schedulerV1 } from '@rrs/proto';
import { DomainError, NotFoundError, type PromiseClient } from '@rrs/runtime';

/**
 * What the connectors ask of the other services: the contacts directory (locations, contacts, the
 * organization's locale) and the cascade scheduler (flows, cascades, their cancel). Calls that change something carry
 * an Idempotency-Key; its fingerprint is derived from the key alone, so a retry whose CRM data changed
 * in between replays the first answer instead of failing: one deal, one contact write, one cascade.
 */
export interface ReviewServices {
  /** 404 naming `pointer` when the location is not the organization's. */
  checkLocation(organizationId: string, locationId: string, pointer: string): Promise<void>;
  /** 404 naming `/flowId` when the flow is not the organization's. */
  checkFlow(organizationId: string, flowId: string): Promise<void>;
  organizationLocale(organizationId: string): Promise<string>;
  /**
   * Saves the contact and starts its cascade: one StartCascade with the contact, as POST /contacts with
   * `startCascade` (the scheduler's contactCascade.ts): refused before the contact is saved, by the
   * scheduler's one admission decision (its recipient budget included: 429 `recipient_quota_exceeded`,
   * retried later).
   */
  saveContactAndStart(contact: ContactInput, cascade: CascadeInput, keys: { contact: string; cascade: string }): Promise<{ contact: StoredContact; cascadeId: string; replayed: boolean }>;
  /** Cancels a cascade (its recipients not finished yet finish `canceled`); how many it finished. */
  cancelCascade(organizationId: string, cascadeId: string, idempotencyKey: string): Promise<number>;
  /** Whether the cascade has finished (every recipient finished). */
  cascadeFinished(organizationId: string, cascadeId: string): Promise<boolean>;
}

export interface ContactInput {
  organizationId: string;
  externalId: string;
  name: string;
  email: string;
  phone: string;
  locationId: string;
}

export interface StoredContact {
  id: string;
  externalId: string;
  name: string;
  email: string;
  phone: string;
}

export interface CascadeInput {
  flowId: string;
  /** The cascade's externalId (`amocrm:lead:<id>`, `bitrix24:deal:<id>`). */
  externalId: string;
  name: string;
}

function idempotencyMetadata(key: string): Record<string, string> {
  return { [MD_IDEMPOTENCY_KEY]: key, [MD_IDEMPOTENCY_FINGERPRINT]: createHash('sha256').update(`connectors\n${key}`).digest('hex') };
}

/** The pointers of an `invalid` error's fields (`/phone`, `/email`, …). */
export function invalidPointers(err: unknown): string[] {
  if (!(err instanceof DomainError) || err.kind !== 'invalid') return [];
  const errors = (err.details?.errors ?? []) as Array<{ pointer?: string }>;
  return errors.map((e) => e.pointer ?? '').filter((p) => p !== '');
}

export function grpcReviewServices(
  contacts: PromiseClient<contactsV1.ContactsServiceClient>,
  scheduler: PromiseClient<schedulerV1.CascadeSchedulerServiceClient>,
): ReviewServices {
  return {
    async checkLocation(organizationId, locationId, pointer) {
      try {
        await contacts.getLocation({ organizationId, id: locationId });
      } catch (err) {
        if (err instanceof DomainError && err.kind === 'not_found') {
          throw new NotFoundError(`location ${locationId}`, { cause: err, details: { errors: [{ pointer, detail: 'no such location in this organization' }] } });
        }
        throw err;
      }
    },
    async checkFlow(organizationId, flowId) {
      const { flows } = await scheduler.listFlows({ organizationId });
      if (!flows.some((f) => f.id === flowId)) throw new NotFoundError(`flow ${flowId}`, { details: { errors: [{ pointer: '/flowId', detail: 'no such flow in this organization' }] } });
    },
    async organizationLocale(organizationId) {
      const { organization } = await contacts.getOrganization({ id: organizationId });
      return organization?.locale ?? 'en';
    },
    async saveContactAndStart(input, cascade, keys) {
      // Presence matters to UpsertContact: a field left out keeps what is stored, so an empty CRM field
      // never clears what the directory knows. A won deal obeys the organization's cooldown like any
      // request (docs/customer-respect.md).
      const contactKey = idempotencyMetadata(keys.contact);
      const started = await scheduler.startCascade(
        {
          organizationId: input.organizationId, locationId: '', name: cascade.name, flowId: cascade.flowId, channel: '', externalId: cascade.externalId, recipients: [],
          ignoreCooldown: false, dryRun: false,
          contact: {
            organizationId: input.organizationId,
            externalId: input.externalId,
            name: input.name || undefined,
            email: input.email || undefined,
            phone: input.phone || undefined,
            locationId: input.locationId,
            consentAt: undefined,
            attributesJson: undefined,
            startCascade: true,
            flowId: cascade.flowId,
          },
          contactIdempotencyKey: contactKey[MD_IDEMPOTENCY_KEY],
          contactIdempotencyFingerprint: contactKey[MD_IDEMPOTENCY_FINGERPRINT],
        },
        { metadata: idempotencyMetadata(keys.cascade) },
      );
      const contact = started.contact!;
      return {
        contact: { id: contact.id, externalId: contact.externalId ?? input.externalId, name: contact.name ?? '', email: contact.email ?? '', phone: contact.phone ?? '' },
        cascadeId: started.id,
        replayed: started.idempotentReplayed,
      };
    },
    async cancelCascade(organizationId, cascadeId, idempotencyKey) {
      const answer = await scheduler.cancelCascade({ organizationId, id: cascadeId }, { metadata: idempotencyMetadata(idempotencyKey) });
      return answer.canceled;
    },
    async cascadeFinished(organizationId, cascadeId) {
      const { cascade } = await scheduler.getCascade({ organizationId, id: cascadeId });
      return cascade?.status === 'finished';
    },
  };
}
