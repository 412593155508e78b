import { schedulerV1 } from '@rrs/proto';
import { runIdempotent, type IdempotencyRequest } from '@rrs/idempotency';
import { inTransaction, InvalidError, NotFoundError, uuidv7, type FieldProblem, type Pool } from '@rrs/runtime';
import { isUuid } from './ids';
import type { OrganizationProfiles } from './organizationProfiles';
import { erasePerson } from './personErasure';
import type { AddressHasher } from './personHash';
import { e164, isEmail } from './recipientInput';
import { savedAnswerCodec } from './savedAnswer';

/** The longest external id a contact or recipient can have (contacts' MAX_EXTERNAL_ID_LENGTH). */
const MAX_EXTERNAL_ID = 200;

const codec = savedAnswerCodec(schedulerV1.RequestPersonErasureResponse);

interface ErasureRow { id: string; status: string; requested_at: Date; done_at: Date | null }
const toProto = (row: ErasureRow): schedulerV1.PersonErasure => ({ id: row.id, status: row.status, requestedAt: row.requested_at, doneAt: row.done_at ?? undefined });

/**
 * Erasure requests per person (person_erasures; docs/customer-respect.md, "Erasure"). A request is
 * recorded `pending` once its identifiers are read; the caller erases the other services' rows, then
 * `complete` erases this service's (personErasure.ts) and marks it `done`. Invariant: a request row and
 * a saved idempotent answer never hold an identifier of the person.
 */
export class PersonErasures {
  constructor(private readonly deps: { pool: Pool; profiles: OrganizationProfiles; hasher: AddressHasher }) {}

  async request(request: schedulerV1.RequestPersonErasureRequest, idempotency?: IdempotencyRequest): Promise<schedulerV1.RequestPersonErasureResponse> {
    const { email, phone } = await this.read(request);
    const { result, replayed } = await runIdempotent(this.deps.pool, idempotency, codec, async (client) => {
      const { rows } = await client.query<ErasureRow>(
        'INSERT INTO person_erasures (id, organization_id, actor) VALUES ($1, $2, $3) RETURNING id, status, requested_at, done_at',
        [uuidv7(), request.organizationId, request.actor || 'admin'],
      );
      return { erasure: toProto(rows[0]), email: '', phone: '' };
    });
    // A replay of a request still pending (the caller failed before completing it) is completed again
    // by the caller; the identifiers are handed back outside the saved answer.
    return { ...result, email, phone, idempotentReplayed: replayed };
  }

  async complete(request: schedulerV1.CompletePersonErasureRequest): Promise<schedulerV1.CompletePersonErasureResponse> {
    const { id } = await this.find(request.organizationId, request.id);
    // The request's row stays locked while the erasure runs (erasePerson never touches it), so two
    // completions of one request erase once: the second finds it done, as a replay does.
    return inTransaction(this.deps.pool, async (client) => {
      const { rows: locked } = await client.query<ErasureRow & { actor: string }>('SELECT id, status, requested_at, done_at, actor FROM person_erasures WHERE id = $1 FOR UPDATE', [id]);
      if (locked[0].status === 'done') return { erasure: toProto(locked[0]) };
      await erasePerson(this.deps.pool, this.deps.hasher, {
        organizationId: request.organizationId, requestId: id, actor: locked[0].actor, email: request.email, phone: request.phone, contactExternalId: request.contactExternalId, addresses: request.addresses,
      });
      const { rows } = await client.query<ErasureRow>(`UPDATE person_erasures SET status = 'done', done_at = now() WHERE id = $1 RETURNING id, status, requested_at, done_at`, [id]);
      return { erasure: toProto(rows[0]) };
    });
  }

  async get(request: schedulerV1.GetPersonErasureRequest): Promise<schedulerV1.GetPersonErasureResponse> {
    return { erasure: toProto(await this.find(request.organizationId, request.id)) };
  }

  private async find(organizationId: string, id: string): Promise<ErasureRow> {
    const { rows } = isUuid(organizationId) && isUuid(id)
      ? await this.deps.pool.query<ErasureRow>('SELECT id, status, requested_at, done_at FROM person_erasures WHERE organization_id = $1 AND id = $2', [organizationId, id])
      : { rows: [] };
    if (!rows[0]) throw new NotFoundError(`erasure ${id}`);
    return rows[0];
  }

  /**
   * The identifiers as the ledgers key them: a lower-case email, an E.164 phone in the organization's
   * region, an external id. None at all, or one that is malformed, is `invalid` naming its field, before
   * anything is recorded. An unknown organization is `not_found`.
   */
  private async read(request: schedulerV1.RequestPersonErasureRequest): Promise<{ email: string; phone: string }> {
    const email = request.email.trim();
    const phone = request.phone.trim();
    const externalId = request.contactExternalId.trim();
    if (!email && !phone && !externalId) throw InvalidError.field('', 'one or more of email, phone, contactExternalId');
    const { organization } = await this.deps.profiles.getSendingProfile(request.organizationId);
    const region = organization.defaultRegion || 'RU';
    const readPhone = phone ? e164(phone, region) : '';
    const errors: FieldProblem[] = [];
    if (email && !isEmail(email)) errors.push({ pointer: '/email', detail: 'must be an email address' });
    if (readPhone === null) errors.push({ pointer: '/phone', detail: `is not a phone number (numbers without a country code are read as ${region})` });
    if (externalId.length > MAX_EXTERNAL_ID) errors.push({ pointer: '/contactExternalId', detail: `at most ${MAX_EXTERNAL_ID} characters` });
    if (errors.length > 0) throw new InvalidError(errors);
    return { email: email.toLowerCase(), phone: readPhone ?? '' };
  }
}
