import type { Pool } from '@rrs/runtime';
import { AppError, uuidv7 } from '@rrs/runtime';
import { DEFAULT_SCOPES, isScope } from '@rrs/proto';
import { displayParts, generateApiKey, hashApiKey, isWellFormedApiKey } from './apiKeys';

export interface Organization {
  id: string;
  name: string;
  plan: string;
  emailConfirmed: boolean;
  smsBalance: number;
  timeZone: string;
  locale: string;
  defaultRegion: string;
  createdAt: Date;
}

export interface ApiKeyRecord {
  id: string;
  organizationId: string;
  name: string;
  scopes: string[];
  prefix: string;
  last4: string;
  createdAt: Date;
  revokedAt: Date | null;
}

export interface ReviewLink {
  provider: string;
  url: string;
}

export interface Location {
  id: string;
  organizationId: string;
  name: string;
  address: string;
  city: string;
  timeZone: string;
  reviewLinks: ReviewLink[];
}

const ORG_COLUMNS = `id, name, plan, email_confirmed AS "emailConfirmed", sms_balance AS "smsBalance",
  time_zone AS "timeZone", locale, default_region AS "defaultRegion", created_at AS "createdAt"`;
const KEY_COLUMNS = `id, organization_id AS "organizationId", name, scopes, prefix, last4, created_at AS "createdAt", revoked_at AS "revokedAt"`;
const LOCATION_COLUMNS = `id, organization_id AS "organizationId", name, address, city, time_zone AS "timeZone", review_links AS "reviewLinks"`;

export class Directory {
  constructor(private readonly pool: Pool) {}

  async createOrganization(input: Partial<Omit<Organization, 'id' | 'createdAt'>> & { name: string }): Promise<Organization> {
    const { rows } = await this.pool.query<Organization>(
      `INSERT INTO organizations (id, name, plan, email_confirmed, sms_balance, time_zone, locale, default_region)
       VALUES ($1, $2, coalesce($3, 'trial'), coalesce($4, false), coalesce($5, 0), coalesce($6, 'UTC'), coalesce($7, 'en'), coalesce($8, 'RU'))
       RETURNING ${ORG_COLUMNS}`,
      [uuidv7(), input.name, input.plan || null, input.emailConfirmed ?? null, input.smsBalance ?? null, input.timeZone || null, input.locale || null, input.defaultRegion || null],
    );
    return rows[0];
  }

  async getOrganization(id: string): Promise<Organization> {
    const { rows } = await this.pool.query<Organization>(`SELECT ${ORG_COLUMNS} FROM organizations WHERE id = $1`, [asUuid(id, 'organization')]);
    if (!rows[0]) throw new AppError(404, 'not_found', `organization ${id} not found`);
    return rows[0];
  }

  /** Issues a key. The secret is returned here and never again: only its hash is stored. */
  async issueApiKey(input: { organizationId: string; name?: string; scopes?: string[]; secret?: string }): Promise<{ apiKey: ApiKeyRecord; secret: string }> {
    await this.getOrganization(input.organizationId);
    const scopes = input.scopes && input.scopes.length > 0 ? input.scopes : [...DEFAULT_SCOPES];
    const unknown = scopes.filter((s) => !isScope(s));
    if (unknown.length) throw new AppError(400, 'invalid_request', `unknown scopes: ${unknown.join(', ')}`, { details: { scopes: unknown } });
    const secret = input.secret || generateApiKey();
    if (!isWellFormedApiKey(secret)) throw new AppError(400, 'invalid_request', 'the given key is not a well-formed API key');
    const { prefix, last4 } = displayParts(secret);
    const { rows } = await this.pool.query<ApiKeyRecord>(
      `INSERT INTO api_keys (id, organization_id, name, key_hash, prefix, last4, scopes)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (key_hash) DO NOTHING
       RETURNING ${KEY_COLUMNS}`,
      [uuidv7(), input.organizationId, input.name ?? '', hashApiKey(secret), prefix, last4, [...new Set(scopes)]],
    );
    if (!rows[0]) throw new AppError(409, 'conflict', 'this key already exists');
    return { apiKey: rows[0], secret };
  }

  /** Resolves a key to its organization and scopes; anything else is `invalid_api_key`. */
  async authenticate(secret: string): Promise<{ organization: Organization; keyId: string; scopes: string[] }> {
    if (!isWellFormedApiKey(secret)) throw new AppError(401, 'invalid_api_key', 'the API key is malformed');
    const { rows } = await this.pool.query<{ keyId: string; scopes: string[]; revokedAt: Date | null } & Organization>(
      `SELECT k.id AS "keyId", k.scopes, k.revoked_at AS "revokedAt",
              o.id, o.name, o.plan, o.email_confirmed AS "emailConfirmed", o.sms_balance AS "smsBalance",
              o.time_zone AS "timeZone", o.locale, o.default_region AS "defaultRegion", o.created_at AS "createdAt"
         FROM api_keys k JOIN organizations o ON o.id = k.organization_id
        WHERE k.key_hash = $1`,
      [hashApiKey(secret)],
    );
    const row = rows[0];
    if (!row) throw new AppError(401, 'invalid_api_key', 'the API key is not known');
    if (row.revokedAt) throw new AppError(401, 'invalid_api_key', 'the API key has been revoked');
    const { keyId, scopes, revokedAt: _revoked, ...organization } = row;
    return { organization, keyId, scopes };
  }

  async createLocation(input: Omit<Location, 'id'>): Promise<Location> {
    await this.getOrganization(input.organizationId);
    const { rows } = await this.pool.query<Location>(
      `INSERT INTO locations (id, organization_id, name, address, city, time_zone, review_links)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${LOCATION_COLUMNS}`,
      [uuidv7(), input.organizationId, input.name, input.address, input.city, input.timeZone, JSON.stringify(input.reviewLinks)],
    );
    return rows[0];
  }

  async listLocations(organizationId: string): Promise<Location[]> {
    const { rows } = await this.pool.query<Location>(
      `SELECT ${LOCATION_COLUMNS} FROM locations WHERE organization_id = $1 AND deleted_at IS NULL ORDER BY created_at, id`,
      [asUuid(organizationId, 'organization')],
    );
    return rows;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids are UUIDs; anything else cannot name an object, so it is "not found" rather than a database error. */
export function asUuid(id: string, what: string): string {
  if (!UUID.test(id)) throw new AppError(404, 'not_found', `${what} ${id} not found`);
  return id;
}
