import { z } from 'zod';
import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/max';
import { inTransaction, InvalidError, NotFoundError, sqlArray, uuidv7, type Pool, type PoolClient } from '@rrs/runtime';
import { describePhoneRefusal, phoneCountries, phoneRefusal } from '@rrs/proto';
import { runIdempotent, type Codec, type IdempotencyRequest } from '@rrs/idempotency';
import { asUuid, checkText, FieldErrors, found, isUuid } from './validation';

export interface Contact {
  id: string;
  organizationId: string;
  externalId: string | null;
  name: string | null;
  email: string | null;
  /** E.164. */
  phone: string | null;
  locationId: string | null;
  consentAt: Date | null;
  attributes: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * One submission of POST /contacts. For every field: undefined = keep what is stored (or nothing, for
 * a new contact); '' = clear it; anything else = set it.
 */
export interface ContactSubmission {
  organizationId: string;
  externalId?: string;
  name?: string;
  email?: string;
  phone?: string;
  locationId?: string;
  /** ISO 8601 with an offset, as the caller wrote it. */
  consentAt?: string;
  /** JSON text of an object; replaces the stored attributes. */
  attributesJson?: string;
  startCascade?: boolean;
  flowId?: string;
}

export interface UpsertResult {
  contact: Contact;
  created: boolean;
}

export const MAX_ATTRIBUTE_KEYS = 50;
export const MAX_ATTRIBUTES_BYTES = 8 * 1024;
export const MAX_EXTERNAL_ID_LENGTH = 200;

// Date and time, seconds optional, fraction optional, and a mandatory zone: Z or ±hh:mm.
const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
const emailSchema = z.email();

const CONTACT_COLUMNS = `id, organization_id AS "organizationId", external_id AS "externalId", name, email, phone,
  location_id AS "locationId", consent_at AS "consentAt", attributes, created_at AS "createdAt", updated_at AS "updatedAt"`;

/** Saved responses are JSON; the dates are revived so a replay equals the first answer. */
const upsertCodec: Codec<UpsertResult> = {
  encode: (result) => Buffer.from(JSON.stringify(result)),
  decode: (bytes) => {
    const saved = JSON.parse(Buffer.from(bytes).toString('utf8')) as UpsertResult;
    const dates = saved.contact as unknown as Record<'consentAt' | 'createdAt' | 'updatedAt', string | null>;
    return {
      created: saved.created,
      contact: { ...saved.contact, consentAt: dates.consentAt ? new Date(dates.consentAt) : null, createdAt: new Date(dates.createdAt!), updatedAt: new Date(dates.updatedAt!) },
    };
  },
};

interface Normalized {
  externalId: string | null;
  fields: { name?: string | null; email?: string | null; phone?: string | null; locationId?: string | null; consentAt?: Date | null; attributes?: Record<string, unknown> };
}

/** Contacts of an organization, deduplicated by the caller's externalId. */
export class ContactBook {
  constructor(private readonly pool: Pool, private readonly options: { idempotencyTtlMs?: number } = {}) {}

  /**
   * Creates or updates a contact (POST /contacts). Checks run in this order, all before any write:
   * fields (invalid), the location (not_found), and with `startCascade` a location at all (invalid
   * `/locationId`). Whether the cascade may start (the sending rule, the flow, the recipient budget) is
   * not this service's to say: the scheduler, which calls this for its StartCascade with a contact, ran
   * its admission pre-check before and starts the cascade once this returns. With an Idempotency-Key the
   * answer is saved in the same transaction as the write.
   */
  async upsert(input: ContactSubmission, idempotency?: IdempotencyRequest): Promise<UpsertResult & { replayed: boolean }> {
    asUuid(input.organizationId, 'organization');
    const { result, replayed } = await runIdempotent(this.pool, idempotency, upsertCodec, async (client) => {
      const { rows: orgs } = await client.query<{ plan: string; emailConfirmed: boolean; defaultRegion: string; allowedCountries: string[] }>(
        'SELECT plan, email_confirmed AS "emailConfirmed", default_region AS "defaultRegion", allowed_countries AS "allowedCountries" FROM organizations WHERE id = $1',
        [input.organizationId],
      );
      const organization = found(orgs[0], `organization ${input.organizationId}`);
      const normalized = normalize(input, organization.defaultRegion);
      if (normalized.fields.phone) refusePhone(normalized.fields.phone, phoneCountries(organization));
      if (normalized.fields.locationId) await requireLocation(client, input.organizationId, normalized.fields.locationId);
      // The cascade of `startCascade` runs at the contact's location; without one the request is refused
      // before the write, so a refusal never leaves a saved contact behind.
      if (input.startCascade && !(await effectiveLocation(client, input.organizationId, normalized))) {
        throw InvalidError.field('/locationId', 'startCascade needs the contact to have a location: send locationId (an id from GET /locations)');
      }
      return write(client, input.organizationId, normalized);
    }, { ttlMs: this.options.idempotencyTtlMs });
    return { ...result, replayed };
  }

  async get(organizationId: string, id: string): Promise<Contact> {
    const { rows } = await this.pool.query<Contact>(
      `SELECT ${CONTACT_COLUMNS} FROM contacts WHERE organization_id = $1 AND id = $2`,
      [asUuid(organizationId, 'organization'), asUuid(id, 'contact')],
    );
    return found(rows[0], `contact ${id}`);
  }

  /**
   * Erasure per person (docs/customer-respect.md, "Erasure"): deletes the organization's contacts with
   * that lower-case email, E.164 phone (as the scheduler read them) or external id — their consent
   * (`consent_at`) and attributes with them — and the saved idempotent responses of POST /contacts
   * that hold one of the identifiers (a retry with their key would hand the person back). Idempotent.
   */
  async erasePerson(input: { organizationId: string; email: string; phone: string; contactExternalId: string }): Promise<{ contacts: number; idempotencyKeys: number; addresses: string[] }> {
    if (!isUuid(input.organizationId)) return { contacts: 0, idempotencyKeys: 0, addresses: [] };
    const identifiers = [input.email, input.phone, input.contactExternalId].map((value) => value.trim()).filter(Boolean);
    if (identifiers.length === 0) return { contacts: 0, idempotencyKeys: 0, addresses: [] };
    return inTransaction(this.pool, async (client) => {
      const deleted = await client.query<{ email: string | null; phone: string | null }>(
        `DELETE FROM contacts WHERE organization_id = $1
            AND (($2 <> '' AND lower(email) = $2) OR ($3 <> '' AND phone = $3) OR ($4 <> '' AND external_id = $4))
         RETURNING lower(email) AS email, phone`,
        [input.organizationId, input.email.trim().toLowerCase(), input.phone.trim(), input.contactExternalId.trim()],
      );
      const forgotten = await client.query(
        `DELETE FROM idempotency_keys k WHERE k.organization_id = $1
            AND EXISTS (SELECT 1 FROM unnest($2::text[]) i WHERE position(convert_to(i, 'UTF8') IN k.response) > 0)`,
        [input.organizationId, sqlArray([...identifiers, ...deleted.rows.flatMap((row) => [row.email ?? '', row.phone ?? '']).filter(Boolean)])],
      );
      const addresses = [...new Set(deleted.rows.flatMap((row) => [row.email ?? '', row.phone ?? '']).filter(Boolean))];
      return { contacts: deleted.rowCount ?? 0, idempotencyKeys: forgotten.rowCount ?? 0, addresses };
    });
  }

  async count(organizationId: string): Promise<number> {
    const { rows } = await this.pool.query<{ total: number }>('SELECT count(*)::int AS total FROM contacts WHERE organization_id = $1', [asUuid(organizationId, 'organization')]);
    return rows[0].total;
  }
}

function normalize(input: ContactSubmission, defaultRegion: string): Normalized {
  const errors = new FieldErrors();
  const normalized: Normalized = { externalId: null, fields: {} };
  const { fields } = normalized;

  if (input.externalId !== undefined && input.externalId !== '') {
    checkText(errors, '/externalId', input.externalId, { min: 1, max: MAX_EXTERNAL_ID_LENGTH });
    normalized.externalId = input.externalId;
  }
  if (input.name !== undefined) {
    checkText(errors, '/name', input.name, { max: 200 });
    fields.name = input.name === '' ? null : input.name;
  }
  if (input.email !== undefined) {
    const email = input.email.trim();
    if (email !== '' && (email.length > 254 || !emailSchema.safeParse(email).success)) errors.add('/email', 'must be an email address');
    fields.email = email === '' ? null : email;
  }
  if (input.phone !== undefined) {
    if (input.phone.trim() === '') fields.phone = null;
    else {
      const parsed = input.phone.length <= 64 ? parsePhoneNumberFromString(input.phone, { defaultCountry: defaultRegion as CountryCode }) : undefined;
      if (!parsed || !parsed.isValid()) errors.add('/phone', `is not a phone number (numbers without a country code are read as ${defaultRegion})`);
      else fields.phone = parsed.number;
    }
  }
  if (input.locationId !== undefined) {
    // A malformed id cannot name a location; it is reported as unknown below, like any other.
    fields.locationId = input.locationId === '' ? null : input.locationId;
  }
  if (input.consentAt !== undefined) {
    if (input.consentAt === '') fields.consentAt = null;
    else {
      const consentAt = new Date(input.consentAt);
      if (!ISO_WITH_OFFSET.test(input.consentAt) || Number.isNaN(consentAt.getTime())) errors.add('/consentAt', 'must be an ISO 8601 date-time with an offset, e.g. 2026-05-01T12:00:00+03:00');
      else fields.consentAt = consentAt;
    }
  }
  if (input.attributesJson !== undefined) {
    const attributes = readAttributes(input.attributesJson);
    if (typeof attributes === 'string') errors.add('/attributes', attributes);
    else fields.attributes = attributes;
  }
  if (input.flowId && !input.startCascade) errors.add('/flowId', 'is only used with startCascade: true');
  errors.throwIfAny();
  return normalized;
}

/**
 * A phone the phone channels would never send to (premium rate, satellite, outside the organization's
 * allowed countries: proto phones.ts) is refused here too, 400 `phone_not_allowed` with its `reason`,
 * rather than kept on a contact every send would skip.
 */
function refusePhone(phone: string, countries: string[]): void {
  const refusal = phoneRefusal(phone, countries);
  if (!refusal) return;
  const detail = describePhoneRefusal(refusal, countries);
  throw new InvalidError([{ pointer: '/phone', detail }], { code: 'phone_not_allowed', message: `/phone: ${detail}`, details: { ...refusal, allowedCountries: countries } });
}

/** The attributes object of the JSON text, or what is wrong with it. */
function readAttributes(json: string): Record<string, unknown> | string {
  let attributes: unknown;
  try {
    attributes = JSON.parse(json);
  } catch {
    attributes = undefined;
  }
  if (!attributes || typeof attributes !== 'object' || Array.isArray(attributes)) return 'must be a JSON object';
  if (Object.keys(attributes).length > MAX_ATTRIBUTE_KEYS) return `may have at most ${MAX_ATTRIBUTE_KEYS} keys`;
  const text = JSON.stringify(attributes);
  if (Buffer.byteLength(text) > MAX_ATTRIBUTES_BYTES) return `may be at most ${MAX_ATTRIBUTES_BYTES} bytes as JSON`;
  if (text.includes('\\u0000')) return 'must not contain NUL characters';
  return attributes as Record<string, unknown>;
}

async function requireLocation(client: PoolClient, organizationId: string, locationId: string): Promise<void> {
  const live = isUuid(locationId)
    ? (await client.query('SELECT 1 FROM locations WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL', [organizationId, locationId])).rowCount
    : 0;
  if (!live) {
    throw new NotFoundError(`location ${locationId}`, { details: { errors: [{ pointer: '/locationId', detail: 'no such location in this organization' }] } });
  }
}

/** The location the contact will have once written: the one sent (null when cleared), else the stored one. */
async function effectiveLocation(client: PoolClient, organizationId: string, normalized: Normalized): Promise<string | null> {
  if ('locationId' in normalized.fields) return normalized.fields.locationId ?? null;
  if (normalized.externalId === null) return null;
  const { rows } = await client.query<{ locationId: string | null }>(
    `SELECT location_id AS "locationId" FROM contacts
      WHERE organization_id = $1 AND external_id = $2
        AND EXISTS (SELECT 1 FROM locations WHERE locations.id = contacts.location_id AND locations.deleted_at IS NULL)`,
    [organizationId, normalized.externalId],
  );
  return rows[0]?.locationId ?? null;
}

const FIELD_COLUMNS = { name: 'name', email: 'email', phone: 'phone', locationId: 'location_id', consentAt: 'consent_at', attributes: 'attributes' } as const;

async function write(client: PoolClient, organizationId: string, normalized: Normalized): Promise<UpsertResult> {
  const { externalId, fields } = normalized;
  const sent = Object.keys(fields) as Array<keyof typeof FIELD_COLUMNS>;
  const columns = sent.map((field) => FIELD_COLUMNS[field]);
  const values = sent.map((field) => (field === 'attributes' ? JSON.stringify(fields.attributes) : fields[field]));
  const insertColumns = ['id', 'organization_id', 'external_id', ...columns];
  const placeholders = insertColumns.map((_column, index) => `$${index + 1}`);
  // Only the fields sent are overwritten on a repeat submission; the others keep their stored value.
  const onConflict = externalId === null
    ? ''
    : `ON CONFLICT (organization_id, external_id) DO UPDATE SET ${[...columns.map((column) => `${column} = excluded.${column}`), 'updated_at = now()'].join(', ')}`;
  const { rows } = await client.query<Contact & { created: boolean }>(
    `INSERT INTO contacts (${insertColumns.join(', ')}) VALUES (${placeholders.join(', ')}) ${onConflict}
     RETURNING ${CONTACT_COLUMNS}, (xmax = 0) AS created`,
    [uuidv7(), organizationId, externalId, ...values],
  );
  const { created, ...contact } = rows[0];
  return { contact, created };
}
