import { z } from 'zod';
import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/max';
import { AppError, uuidv7, type Pool, type PoolClient } from '@rrs/runtime';
import { runIdempotent, type Codec, type IdempotencyRequest } from '@rrs/idempotency';
import { asUuid, checkText, FieldErrors, invalidField, isUuid } from './validation';

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
  encode: (v) => Buffer.from(JSON.stringify(v)),
  decode: (bytes) => {
    const v = JSON.parse(Buffer.from(bytes).toString('utf8')) as UpsertResult;
    const c = v.contact as unknown as Record<string, string | null>;
    return {
      created: v.created,
      contact: { ...v.contact, consentAt: c.consentAt ? new Date(c.consentAt) : null, createdAt: new Date(c.createdAt!), updatedAt: new Date(c.updatedAt!) },
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
   * fields (400), sending rules when `startCascade` (402 `plan_required`, 409 `email_not_confirmed`),
   * the location (404), and with `startCascade` a location at all (400 `/locationId`). The cascade
   * itself is started by the caller (the gateway) with the cascade scheduler once this returns. With an Idempotency-Key the answer is saved in the same
   * transaction as the write.
   */
  async upsert(input: ContactSubmission, idempotency?: IdempotencyRequest): Promise<UpsertResult & { replayed: boolean }> {
    asUuid(input.organizationId, 'organization');
    const { result, replayed } = await runIdempotent(this.pool, idempotency, upsertCodec, async (client) => {
      const { rows: orgs } = await client.query<{ plan: string; emailConfirmed: boolean; defaultRegion: string }>(
        'SELECT plan, email_confirmed AS "emailConfirmed", default_region AS "defaultRegion" FROM organizations WHERE id = $1',
        [input.organizationId],
      );
      const org = orgs[0];
      if (!org) throw new AppError(404, 'not_found', `organization ${input.organizationId} not found`);
      const normalized = normalize(input, org.defaultRegion);
      if (input.startCascade) {
        if (org.plan === 'trial') throw new AppError(402, 'plan_required', 'a trial plan cannot send messages; upgrade the plan in the account');
        if (!org.emailConfirmed) throw new AppError(409, 'email_not_confirmed', "confirm the account's email address before sending messages");
      }
      if (normalized.fields.locationId) await requireLocation(client, input.organizationId, normalized.fields.locationId);
      // The cascade of `startCascade` runs at the contact's location; without one the request is refused
      // before the write, so a 400 never leaves a saved contact behind.
      if (input.startCascade && !(await effectiveLocation(client, input.organizationId, normalized))) {
        throw invalidField('/locationId', 'startCascade needs the contact to have a location: send locationId (an id from GET /locations)');
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
    if (!rows[0]) throw new AppError(404, 'not_found', `contact ${id} not found`);
    return rows[0];
  }

  async count(organizationId: string): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM contacts WHERE organization_id = $1', [asUuid(organizationId, 'organization')]);
    return rows[0].n;
  }
}

function normalize(input: ContactSubmission, defaultRegion: string): Normalized {
  const f = new FieldErrors();
  const out: Normalized = { externalId: null, fields: {} };

  if (input.externalId !== undefined && input.externalId !== '') {
    checkText(f, '/externalId', input.externalId, { min: 1, max: MAX_EXTERNAL_ID_LENGTH });
    out.externalId = input.externalId;
  }
  if (input.name !== undefined) {
    checkText(f, '/name', input.name, { max: 200 });
    out.fields.name = input.name === '' ? null : input.name;
  }
  if (input.email !== undefined) {
    const email = input.email.trim();
    if (email !== '' && (email.length > 254 || !emailSchema.safeParse(email).success)) f.add('/email', 'must be an email address');
    out.fields.email = email === '' ? null : email;
  }
  if (input.phone !== undefined) {
    if (input.phone.trim() === '') out.fields.phone = null;
    else {
      const parsed = input.phone.length <= 64 ? parsePhoneNumberFromString(input.phone, { defaultCountry: defaultRegion as CountryCode }) : undefined;
      if (!parsed || !parsed.isValid()) f.add('/phone', `is not a phone number (numbers without a country code are read as ${defaultRegion})`);
      else out.fields.phone = parsed.number;
    }
  }
  if (input.locationId !== undefined) {
    // A malformed id cannot name a location; it is reported as unknown below, like any other.
    out.fields.locationId = input.locationId === '' ? null : input.locationId;
  }
  if (input.consentAt !== undefined) {
    if (input.consentAt === '') out.fields.consentAt = null;
    else {
      const d = new Date(input.consentAt);
      if (!ISO_WITH_OFFSET.test(input.consentAt) || Number.isNaN(d.getTime())) f.add('/consentAt', 'must be an ISO 8601 date-time with an offset, e.g. 2026-05-01T12:00:00+03:00');
      else out.fields.consentAt = d;
    }
  }
  if (input.attributesJson !== undefined) {
    let attributes: unknown;
    try {
      attributes = JSON.parse(input.attributesJson);
    } catch {
      attributes = undefined;
    }
    if (!attributes || typeof attributes !== 'object' || Array.isArray(attributes)) f.add('/attributes', 'must be a JSON object');
    else if (Object.keys(attributes).length > MAX_ATTRIBUTE_KEYS) f.add('/attributes', `may have at most ${MAX_ATTRIBUTE_KEYS} keys`);
    else if (Buffer.byteLength(JSON.stringify(attributes)) > MAX_ATTRIBUTES_BYTES) f.add('/attributes', `may be at most ${MAX_ATTRIBUTES_BYTES} bytes as JSON`);
    else if (JSON.stringify(attributes).includes('\\u0000')) f.add('/attributes', 'must not contain NUL characters');
    else out.fields.attributes = attributes as Record<string, unknown>;
  }
  if (input.flowId && !input.startCascade) f.add('/flowId', 'is only used with startCascade: true');
  f.throwIfAny();
  return out;
}

async function requireLocation(client: PoolClient, organizationId: string, locationId: string): Promise<void> {
  const found = isUuid(locationId)
    ? (await client.query('SELECT 1 FROM locations WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL', [organizationId, locationId])).rowCount
    : 0;
  if (!found) {
    throw new AppError(404, 'not_found', `location ${locationId} not found`, { details: { errors: [{ pointer: '/locationId', detail: 'no such location in this organization' }] } });
  }
}

/** The location the contact will have once written: the one sent (null when cleared), else the stored one. */
async function effectiveLocation(client: PoolClient, organizationId: string, n: Normalized): Promise<string | null> {
  if ('locationId' in n.fields) return n.fields.locationId ?? null;
  if (n.externalId === null) return null;
  const { rows } = await client.query<{ locationId: string | null }>(
    `SELECT location_id AS "locationId" FROM contacts c
      WHERE c.organization_id = $1 AND c.external_id = $2
        AND EXISTS (SELECT 1 FROM locations l WHERE l.id = c.location_id AND l.deleted_at IS NULL)`,
    [organizationId, n.externalId],
  );
  return rows[0]?.locationId ?? null;
}

const FIELD_COLUMNS = { name: 'name', email: 'email', phone: 'phone', locationId: 'location_id', consentAt: 'consent_at', attributes: 'attributes' } as const;

async function write(client: PoolClient, organizationId: string, n: Normalized): Promise<UpsertResult> {
  const keys = Object.keys(n.fields) as Array<keyof typeof FIELD_COLUMNS>;
  const columns = keys.map((k) => FIELD_COLUMNS[k]);
  const values = keys.map((k) => (k === 'attributes' ? JSON.stringify(n.fields.attributes) : n.fields[k]));
  const insertColumns = ['id', 'organization_id', 'external_id', ...columns];
  const placeholders = insertColumns.map((_c, i) => `$${i + 1}`);
  // Only the fields sent are overwritten on a repeat submission; the others keep their stored value.
  const onConflict = n.externalId === null
    ? ''
    : `ON CONFLICT (organization_id, external_id) DO UPDATE SET ${[...columns.map((c) => `${c} = excluded.${c}`), 'updated_at = now()'].join(', ')}`;
  const { rows } = await client.query<Contact & { created: boolean }>(
    `INSERT INTO contacts (${insertColumns.join(', ')}) VALUES (${placeholders.join(', ')}) ${onConflict}
     RETURNING ${CONTACT_COLUMNS}, (xmax = 0) AS created`,
    [uuidv7(), organizationId, n.externalId, ...values],
  );
  const { created, ...contact } = rows[0];
  return { contact, created };
}
