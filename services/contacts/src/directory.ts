import type { Pool } from '@rrs/runtime';
import { AppError, inTransaction, uuidv7 } from '@rrs/runtime';
import { DEFAULT_SCOPES, isScope } from '@rrs/proto';
import { displayParts, generateApiKey, hashApiKey, isWellFormedApiKey } from './apiKeys';
import { recordLedgerEntry } from './smsBalance';
import { asUuid, checkText, FieldErrors, isHttpsUrl, isRegion, isTimeZone, isUuid, LOCALES, PLANS } from './validation';

export { asUuid } from './validation';

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

export interface OrganizationInput {
  name: string;
  plan?: string;
  emailConfirmed?: boolean;
  smsBalance?: number;
  timeZone?: string;
  locale?: string;
  defaultRegion?: string;
}

export type OrganizationPatch = Partial<OrganizationInput>;

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
  /** IANA zone; empty = the organization's. */
  timeZone: string;
  reviewLinks: ReviewLink[];
  createdAt?: Date;
  updatedAt?: Date;
}

export interface LocationInput {
  organizationId: string;
  name: string;
  address?: string;
  city?: string;
  timeZone?: string;
  reviewLinks?: ReviewLink[];
}

export interface LocationPatch {
  name?: string;
  address?: string;
  city?: string;
  timeZone?: string;
  /** Replaces every link when present. */
  reviewLinks?: ReviewLink[];
}

/** Largest SMS balance an organization may hold; far above any real purchase, well below 2^53. */
export const MAX_SMS_BALANCE = 1_000_000_000;
export const MAX_REVIEW_LINKS = 20;
const PROVIDER = /^[a-z0-9][a-z0-9._-]{0,31}$/;

const ORG_COLUMNS = `id, name, plan, email_confirmed AS "emailConfirmed", sms_balance AS "smsBalance",
  time_zone AS "timeZone", locale, default_region AS "defaultRegion", created_at AS "createdAt"`;
const KEY_COLUMNS = `id, organization_id AS "organizationId", name, scopes, prefix, last4, created_at AS "createdAt", revoked_at AS "revokedAt"`;
const LOCATION_COLUMNS = `id, organization_id AS "organizationId", name, address, city, time_zone AS "timeZone", review_links AS "reviewLinks",
  created_at AS "createdAt", updated_at AS "updatedAt"`;

function checkOrganization(f: FieldErrors, o: OrganizationPatch): void {
  if (o.name !== undefined) checkText(f, '/name', o.name, { min: 1, max: 200 });
  if (o.plan !== undefined && !(PLANS as readonly string[]).includes(o.plan)) f.add('/plan', `must be one of ${PLANS.join(', ')}`);
  if (o.locale !== undefined && !(LOCALES as readonly string[]).includes(o.locale)) f.add('/locale', `must be one of ${LOCALES.join(', ')}`);
  if (o.timeZone !== undefined && !isTimeZone(o.timeZone)) f.add('/timeZone', 'must be an IANA time zone, e.g. Europe/Moscow');
  if (o.defaultRegion !== undefined && !isRegion(o.defaultRegion)) f.add('/defaultRegion', 'must be an ISO 3166 alpha-2 region with a phone numbering plan, e.g. RU');
  if (o.smsBalance !== undefined && (!Number.isSafeInteger(o.smsBalance) || o.smsBalance < 0 || o.smsBalance > MAX_SMS_BALANCE)) {
    f.add('/smsBalance', `must be an integer from 0 to ${MAX_SMS_BALANCE}`);
  }
}

function checkLocation(f: FieldErrors, l: LocationPatch): void {
  if (l.name !== undefined) checkText(f, '/name', l.name, { min: 1, max: 200 });
  if (l.address !== undefined) checkText(f, '/address', l.address, { max: 500 });
  if (l.city !== undefined) checkText(f, '/city', l.city, { max: 200 });
  if (l.timeZone !== undefined && l.timeZone !== '' && !isTimeZone(l.timeZone)) f.add('/timeZone', 'must be an IANA time zone, e.g. Europe/Moscow, or empty for the organization\'s');
  if (l.reviewLinks !== undefined) {
    if (l.reviewLinks.length > MAX_REVIEW_LINKS) f.add('/reviewLinks', `at most ${MAX_REVIEW_LINKS} links`);
    const seen = new Set<string>();
    l.reviewLinks.forEach((link, i) => {
      if (!PROVIDER.test(link.provider)) f.add(`/reviewLinks/${i}/provider`, 'must be a lower-case provider name such as google, yandex or 2gis');
      else if (seen.has(link.provider)) f.add(`/reviewLinks/${i}/provider`, `${link.provider} is listed twice`);
      seen.add(link.provider);
      if (!isHttpsUrl(link.url)) f.add(`/reviewLinks/${i}/url`, 'must be an absolute https URL');
    });
  }
}

/** Organizations, their API keys and their locations. Every query is scoped to one organization. */
export class Directory {
  constructor(private readonly pool: Pool) {}

  async createOrganization(input: OrganizationInput): Promise<Organization> {
    // gRPC sends unset strings as '', which mean "the default" here.
    const o: OrganizationInput = {
      name: input.name,
      plan: input.plan || 'trial',
      emailConfirmed: input.emailConfirmed ?? false,
      smsBalance: input.smsBalance ?? 0,
      timeZone: input.timeZone || 'UTC',
      locale: input.locale || 'en',
      defaultRegion: input.defaultRegion || 'RU',
    };
    const f = new FieldErrors();
    checkOrganization(f, o);
    f.throwIfAny();
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<Organization>(
        `INSERT INTO organizations (id, name, plan, email_confirmed, sms_balance, time_zone, locale, default_region)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${ORG_COLUMNS}`,
        [uuidv7(), o.name, o.plan, o.emailConfirmed, o.smsBalance, o.timeZone, o.locale, o.defaultRegion],
      );
      if (o.smsBalance! > 0) {
        await recordLedgerEntry(client, { organizationId: rows[0].id, kind: 'initial', parts: o.smsBalance!, delta: o.smsBalance!, balanceAfter: o.smsBalance!, reason: 'opening balance' });
      }
      return rows[0];
    });
  }

  async getOrganization(id: string): Promise<Organization> {
    const { rows } = await this.pool.query<Organization>(`SELECT ${ORG_COLUMNS} FROM organizations WHERE id = $1`, [asUuid(id, 'organization')]);
    if (!rows[0]) throw new AppError(404, 'not_found', `organization ${id} not found`);
    return rows[0];
  }

  /** Organizations in creation order (ids are UUIDv7), one page at a time. */
  async listOrganizations(options: { limit?: number; after?: string } = {}): Promise<{ organizations: Organization[]; nextAfter: string }> {
    const limit = options.limit || 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new AppError(400, 'invalid_request', 'limit must be 1 to 500', { details: { errors: [{ parameter: 'limit', detail: 'must be an integer from 1 to 500' }] } });
    if (options.after && !isUuid(options.after)) throw new AppError(400, 'invalid_request', 'after must be an organization id', { details: { errors: [{ parameter: 'after', detail: 'must be an organization id' }] } });
    const { rows } = await this.pool.query<Organization>(
      `SELECT ${ORG_COLUMNS} FROM organizations WHERE ($1::uuid IS NULL OR id > $1::uuid) ORDER BY id LIMIT $2`,
      [options.after || null, limit + 1],
    );
    const page = rows.slice(0, limit);
    return { organizations: page, nextAfter: rows.length > limit ? page[page.length - 1].id : '' };
  }

  /** Changes the given fields. A new SMS balance is written to the ledger as an adjustment. */
  async updateOrganization(id: string, patch: OrganizationPatch): Promise<Organization> {
    asUuid(id, 'organization');
    const f = new FieldErrors();
    checkOrganization(f, patch);
    f.throwIfAny();
    return inTransaction(this.pool, async (client) => {
      const { rows: current } = await client.query<Organization>(`SELECT ${ORG_COLUMNS} FROM organizations WHERE id = $1 FOR UPDATE`, [id]);
      if (!current[0]) throw new AppError(404, 'not_found', `organization ${id} not found`);
      const { rows } = await client.query<Organization>(
        `UPDATE organizations SET
           name = coalesce($2, name), plan = coalesce($3, plan), email_confirmed = coalesce($4, email_confirmed),
           sms_balance = coalesce($5, sms_balance), time_zone = coalesce($6, time_zone), locale = coalesce($7, locale),
           default_region = coalesce($8, default_region), updated_at = now()
         WHERE id = $1 RETURNING ${ORG_COLUMNS}`,
        [id, patch.name ?? null, patch.plan ?? null, patch.emailConfirmed ?? null, patch.smsBalance ?? null, patch.timeZone ?? null, patch.locale ?? null, patch.defaultRegion ?? null],
      );
      if (patch.smsBalance !== undefined && patch.smsBalance !== current[0].smsBalance) {
        const delta = patch.smsBalance - current[0].smsBalance;
        await recordLedgerEntry(client, { organizationId: id, kind: 'adjustment', parts: Math.abs(delta), delta, balanceAfter: patch.smsBalance, reason: 'balance set by the account admin' });
      }
      return rows[0];
    });
  }

  /** Issues a key. The secret is returned here and never again: only its hash is stored. */
  async issueApiKey(input: { organizationId: string; name?: string; scopes?: string[]; secret?: string }): Promise<{ apiKey: ApiKeyRecord; secret: string }> {
    await this.getOrganization(input.organizationId);
    const f = new FieldErrors();
    if (input.name) checkText(f, '/name', input.name, { max: 200 });
    const scopes = input.scopes && input.scopes.length > 0 ? input.scopes : [...DEFAULT_SCOPES];
    scopes.forEach((s, i) => {
      if (!isScope(s)) f.add(`/scopes/${i}`, `unknown scope ${JSON.stringify(s)}`);
    });
    const secret = input.secret || generateApiKey();
    if (!isWellFormedApiKey(secret)) f.add('/secret', 'is not a well-formed API key');
    f.throwIfAny();
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

  async listApiKeys(organizationId: string): Promise<ApiKeyRecord[]> {
    await this.getOrganization(organizationId);
    const { rows } = await this.pool.query<ApiKeyRecord>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE organization_id = $1 ORDER BY created_at, id`, [organizationId]);
    return rows;
  }

  /** Revokes a key of the organization; revoking a revoked key keeps its first revocation time. */
  async revokeApiKey(organizationId: string, id: string): Promise<ApiKeyRecord> {
    asUuid(organizationId, 'organization');
    asUuid(id, 'API key');
    const { rows } = await this.pool.query<ApiKeyRecord>(
      `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE organization_id = $1 AND id = $2 RETURNING ${KEY_COLUMNS}`,
      [organizationId, id],
    );
    if (!rows[0]) throw new AppError(404, 'not_found', `API key ${id} not found`);
    return rows[0];
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

  async createLocation(input: LocationInput): Promise<Location> {
    const l = { name: input.name, address: input.address ?? '', city: input.city ?? '', timeZone: input.timeZone ?? '', reviewLinks: input.reviewLinks ?? [] };
    await this.getOrganization(input.organizationId);
    const f = new FieldErrors();
    checkLocation(f, l);
    f.throwIfAny();
    const { rows } = await this.pool.query<Location>(
      `INSERT INTO locations (id, organization_id, name, address, city, time_zone, review_links)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${LOCATION_COLUMNS}`,
      [uuidv7(), input.organizationId, l.name, l.address, l.city, l.timeZone, JSON.stringify(l.reviewLinks.map(({ provider, url }) => ({ provider, url })))],
    );
    return rows[0];
  }

  /** A live location of the organization; another organization's or a deleted one is 404. */
  async getLocation(organizationId: string, id: string): Promise<Location> {
    const { rows } = await this.pool.query<Location>(
      `SELECT ${LOCATION_COLUMNS} FROM locations WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL`,
      [asUuid(organizationId, 'organization'), asUuid(id, 'location')],
    );
    if (!rows[0]) throw new AppError(404, 'not_found', `location ${id} not found`);
    return rows[0];
  }

  async updateLocation(organizationId: string, id: string, patch: LocationPatch): Promise<Location> {
    asUuid(organizationId, 'organization');
    asUuid(id, 'location');
    const f = new FieldErrors();
    checkLocation(f, patch);
    f.throwIfAny();
    const { rows } = await this.pool.query<Location>(
      `UPDATE locations SET name = coalesce($3, name), address = coalesce($4, address), city = coalesce($5, city),
              time_zone = coalesce($6, time_zone), review_links = coalesce($7::jsonb, review_links), updated_at = now()
        WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING ${LOCATION_COLUMNS}`,
      [organizationId, id, patch.name ?? null, patch.address ?? null, patch.city ?? null, patch.timeZone ?? null,
        patch.reviewLinks ? JSON.stringify(patch.reviewLinks.map(({ provider, url }) => ({ provider, url }))) : null],
    );
    if (!rows[0]) throw new AppError(404, 'not_found', `location ${id} not found`);
    return rows[0];
  }

  /** Soft delete: contacts keep their reference; the location leaves lists and lookups. */
  async deleteLocation(organizationId: string, id: string): Promise<void> {
    const { rowCount } = await this.pool.query(
      'UPDATE locations SET deleted_at = now(), updated_at = now() WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL',
      [asUuid(organizationId, 'organization'), asUuid(id, 'location')],
    );
    if (!rowCount) throw new AppError(404, 'not_found', `location ${id} not found`);
  }

  async listLocations(organizationId: string): Promise<Location[]> {
    const { rows } = await this.pool.query<Location>(
      `SELECT ${LOCATION_COLUMNS} FROM locations WHERE organization_id = $1 AND deleted_at IS NULL ORDER BY created_at, id`,
      [asUuid(organizationId, 'organization')],
    );
    return rows;
  }
}
