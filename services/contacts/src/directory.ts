import { ConflictError, inTransaction, InvalidError, NotFoundError, UnauthenticatedError, uuidv7, type Pool } from '@rrs/runtime';
import { DEFAULT_COOLDOWN_DAYS, DEFAULT_RESPONSE_WINDOW_MINUTES, DEFAULT_SCOPES, isCooldownDays, MAX_COOLDOWN_DAYS, DEFAULT_SEND_WINDOW, isChannelKey, isResponseWindowMinutes, isScope, MAX_RESPONSE_WINDOW_MINUTES, sendWindowProblems, type SendWindow } from '@rrs/proto';
import { runIdempotent, secretReplay, type Codec, type IdempotencyRequest } from '@rrs/idempotency';
import { displayParts, generateApiKey, hashApiKey, isWellFormedApiKey } from './apiKeys';
import { MAX_SMS_BALANCE, recordLedgerEntry } from './smsBalance';
import { asUuid, checkText, FieldErrors, found, isHttpsUrl, isRegion, isTimeZone, isUuid, LOCALES, PLANS } from './validation';

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
  /** Null: steps go out at any time. */
  sendWindow: SendWindow | null;
  responseWindowMinutes: number;
  /** 0 = no cooldown. */
  cooldownDays: number;
  requireConsent: boolean;
  /** ISO 3166 regions the phone channels send to; empty = `defaultRegion` only (proto phones.ts). */
  allowedCountries: string[];
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
  /** Undefined: the default window (create) or unchanged (patch); null: no window. */
  sendWindow?: SendWindow | null;
  responseWindowMinutes?: number;
  cooldownDays?: number;
  requireConsent?: boolean;
  /** Undefined: none (create) or unchanged (patch); empty: the region only. */
  allowedCountries?: string[];
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

/** A saved key issue: the record (dates revived on replay) and the secret sealed under the Idempotency-Key. */
const issuedKeyCodec: Codec<{ apiKey: ApiKeyRecord; sealedSecret: string }> = {
  encode: (issued) => Buffer.from(JSON.stringify(issued)),
  decode: (bytes) => {
    const saved = JSON.parse(Buffer.from(bytes).toString('utf8')) as { apiKey: ApiKeyRecord & { createdAt: string; revokedAt: string | null }; sealedSecret: string };
    return { apiKey: { ...saved.apiKey, createdAt: new Date(saved.apiKey.createdAt), revokedAt: saved.apiKey.revokedAt ? new Date(saved.apiKey.revokedAt) : null }, sealedSecret: saved.sealedSecret };
  },
};

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
  /** Null: the organization's window applies. */
  sendWindow: SendWindow | null;
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
  sendWindow?: SendWindow | null;
}

export interface LocationPatch {
  name?: string;
  address?: string;
  city?: string;
  timeZone?: string;
  /** Replaces every link when present. */
  reviewLinks?: ReviewLink[];
  /** Undefined: unchanged; null: the organization's window applies. */
  sendWindow?: SendWindow | null;
}

export { MAX_SMS_BALANCE } from './smsBalance';
export const MAX_REVIEW_LINKS = 20;
const MAX_ALLOWED_COUNTRIES = 250;
const PROVIDER = /^[a-z0-9][a-z0-9._-]{0,31}$/;

/** An organization's columns as `Organization` names them (the sending profile reads them too). */
export const ORG_COLUMNS = `id, name, plan, email_confirmed AS "emailConfirmed", sms_balance AS "smsBalance",
  time_zone AS "timeZone", locale, default_region AS "defaultRegion", send_window AS "sendWindow", response_window_minutes AS "responseWindowMinutes",
  cooldown_days AS "cooldownDays", require_consent AS "requireConsent", allowed_countries AS "allowedCountries", created_at AS "createdAt"`;
const KEY_COLUMNS = `id, organization_id AS "organizationId", name, scopes, prefix, last4, created_at AS "createdAt", revoked_at AS "revokedAt"`;
/** A location's columns as `Location` names them. */
export const LOCATION_COLUMNS = `id, organization_id AS "organizationId", name, address, city, time_zone AS "timeZone", review_links AS "reviewLinks",
  send_window AS "sendWindow", created_at AS "createdAt", updated_at AS "updatedAt"`;

function checkSendWindow(errors: FieldErrors, window: SendWindow | null | undefined): void {
  if (!window) return;
  for (const problem of sendWindowProblems(window, isChannelKey)) errors.add(`/sendWindow/${problem.field}`, problem.detail);
}

/** A window as stored: exactly its four fields, days and channels sorted and present (empty = every day / the phone channels). */
function sendWindowJson(window: SendWindow | null | undefined): string | null {
  if (!window) return null;
  return JSON.stringify({ start: window.start, end: window.end, days: [...(window.days ?? [])].sort(), channels: [...(window.channels ?? [])].sort() });
}

function checkOrganization(errors: FieldErrors, organization: OrganizationPatch): void {
  checkSendWindow(errors, organization.sendWindow);
  if (organization.responseWindowMinutes !== undefined && !isResponseWindowMinutes(organization.responseWindowMinutes)) {
    errors.add('/responseWindowMinutes', `must be an integer from 0 (finish when the last step goes out) to ${MAX_RESPONSE_WINDOW_MINUTES}`);
  }
  if (organization.cooldownDays !== undefined && !isCooldownDays(organization.cooldownDays)) {
    errors.add('/cooldownDays', `must be an integer from 0 (no cooldown) to ${MAX_COOLDOWN_DAYS}`);
  }
  const { name, plan, locale, timeZone, defaultRegion, smsBalance, allowedCountries } = organization;
  if (allowedCountries !== undefined) {
    if (allowedCountries.length > MAX_ALLOWED_COUNTRIES) errors.add('/allowedCountries', `at most ${MAX_ALLOWED_COUNTRIES} regions`);
    allowedCountries.forEach((country, index) => {
      if (!isRegion(country)) errors.add(`/allowedCountries/${index}`, 'must be an ISO 3166 alpha-2 region with a phone numbering plan, e.g. RU');
    });
  }
  if (name !== undefined) checkText(errors, '/name', name, { min: 1, max: 200 });
  if (plan !== undefined && !(PLANS as readonly string[]).includes(plan)) errors.add('/plan', `must be one of ${PLANS.join(', ')}`);
  if (locale !== undefined && !(LOCALES as readonly string[]).includes(locale)) errors.add('/locale', `must be one of ${LOCALES.join(', ')}`);
  if (timeZone !== undefined && !isTimeZone(timeZone)) errors.add('/timeZone', 'must be an IANA time zone, e.g. Europe/Moscow');
  if (defaultRegion !== undefined && !isRegion(defaultRegion)) errors.add('/defaultRegion', 'must be an ISO 3166 alpha-2 region with a phone numbering plan, e.g. RU');
  if (smsBalance !== undefined && (!Number.isSafeInteger(smsBalance) || smsBalance < 0 || smsBalance > MAX_SMS_BALANCE)) {
    errors.add('/smsBalance', `must be an integer from 0 to ${MAX_SMS_BALANCE}`);
  }
}

function checkLocation(errors: FieldErrors, location: LocationPatch): void {
  checkSendWindow(errors, location.sendWindow);
  const { name, address, city, timeZone, reviewLinks } = location;
  if (name !== undefined) checkText(errors, '/name', name, { min: 1, max: 200 });
  if (address !== undefined) checkText(errors, '/address', address, { max: 500 });
  if (city !== undefined) checkText(errors, '/city', city, { max: 200 });
  if (timeZone !== undefined && timeZone !== '' && !isTimeZone(timeZone)) errors.add('/timeZone', 'must be an IANA time zone, e.g. Europe/Moscow, or empty for the organization\'s');
  if (reviewLinks !== undefined) {
    if (reviewLinks.length > MAX_REVIEW_LINKS) errors.add('/reviewLinks', `at most ${MAX_REVIEW_LINKS} links`);
    const seen = new Set<string>();
    reviewLinks.forEach((link, index) => {
      if (!PROVIDER.test(link.provider)) errors.add(`/reviewLinks/${index}/provider`, 'must be a lower-case provider name such as google, yandex or 2gis');
      else if (seen.has(link.provider)) errors.add(`/reviewLinks/${index}/provider`, `${link.provider} is listed twice`);
      seen.add(link.provider);
      if (!isHttpsUrl(link.url)) errors.add(`/reviewLinks/${index}/url`, 'must be an absolute https URL');
    });
  }
}

/** Review links as stored: exactly `{provider, url}` each, whatever else the caller's objects carry. */
function reviewLinksJson(links: ReviewLink[]): string {
  return JSON.stringify(links.map(({ provider, url }) => ({ provider, url })));
}

/** Organizations, their API keys and their locations. Every query is scoped to one organization. */
export class Directory {
  constructor(private readonly pool: Pool) {}

  async createOrganization(input: OrganizationInput): Promise<Organization> {
    // gRPC sends unset strings as '', which mean "the default" here.
    const organization: Required<OrganizationInput> = {
      name: input.name,
      plan: input.plan || 'trial',
      emailConfirmed: input.emailConfirmed ?? false,
      smsBalance: input.smsBalance ?? 0,
      timeZone: input.timeZone || 'UTC',
      locale: input.locale || 'en',
      defaultRegion: input.defaultRegion || 'RU',
      sendWindow: input.sendWindow === undefined ? DEFAULT_SEND_WINDOW : input.sendWindow,
      responseWindowMinutes: input.responseWindowMinutes ?? DEFAULT_RESPONSE_WINDOW_MINUTES,
      cooldownDays: input.cooldownDays ?? DEFAULT_COOLDOWN_DAYS,
      requireConsent: input.requireConsent ?? false,
      allowedCountries: [...new Set(input.allowedCountries ?? [])],
    };
    const errors = new FieldErrors();
    checkOrganization(errors, organization);
    errors.throwIfAny();
    const { name, plan, emailConfirmed, smsBalance, timeZone, locale, defaultRegion, sendWindow, responseWindowMinutes, cooldownDays, requireConsent, allowedCountries } = organization;
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<Organization>(
        `INSERT INTO organizations (id, name, plan, email_confirmed, sms_balance, time_zone, locale, default_region, send_window, response_window_minutes, cooldown_days, require_consent, allowed_countries)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12, $13) RETURNING ${ORG_COLUMNS}`,
        [uuidv7(), name, plan, emailConfirmed, smsBalance, timeZone, locale, defaultRegion, sendWindowJson(sendWindow), responseWindowMinutes, cooldownDays, requireConsent, allowedCountries],
      );
      if (smsBalance > 0) {
        await recordLedgerEntry(client, { organizationId: rows[0].id, kind: 'initial', parts: smsBalance, delta: smsBalance, balanceAfter: smsBalance, reason: 'opening balance' });
      }
      return rows[0];
    });
  }

  async getOrganization(id: string): Promise<Organization> {
    const { rows } = await this.pool.query<Organization>(`SELECT ${ORG_COLUMNS} FROM organizations WHERE id = $1`, [asUuid(id, 'organization')]);
    return found(rows[0], `organization ${id}`);
  }

  /** Organizations in creation order (ids are UUIDv7), one page at a time. */
  async listOrganizations(options: { limit?: number; after?: string } = {}): Promise<{ organizations: Organization[]; nextAfter: string }> {
    const limit = options.limit || 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new InvalidError([{ parameter: 'limit', detail: 'must be an integer from 1 to 500' }], { message: 'limit must be 1 to 500' });
    if (options.after && !isUuid(options.after)) throw new InvalidError([{ parameter: 'after', detail: 'must be an organization id' }], { message: 'after must be an organization id' });
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
    const errors = new FieldErrors();
    checkOrganization(errors, patch);
    errors.throwIfAny();
    return inTransaction(this.pool, async (client) => {
      const { rows: locked } = await client.query<Organization>(`SELECT ${ORG_COLUMNS} FROM organizations WHERE id = $1 FOR UPDATE`, [id]);
      const current = found(locked[0], `organization ${id}`);
      const { rows } = await client.query<Organization>(
        `UPDATE organizations SET
           name = coalesce($2, name), plan = coalesce($3, plan), email_confirmed = coalesce($4, email_confirmed),
           sms_balance = coalesce($5, sms_balance), time_zone = coalesce($6, time_zone), locale = coalesce($7, locale),
           default_region = coalesce($8, default_region),
           send_window = CASE WHEN $9::boolean THEN $10::jsonb ELSE send_window END,
           response_window_minutes = coalesce($11, response_window_minutes), cooldown_days = coalesce($12, cooldown_days),
           require_consent = coalesce($13, require_consent), allowed_countries = coalesce($14, allowed_countries), updated_at = now()
         WHERE id = $1 RETURNING ${ORG_COLUMNS}`,
        [id, patch.name ?? null, patch.plan ?? null, patch.emailConfirmed ?? null, patch.smsBalance ?? null, patch.timeZone ?? null, patch.locale ?? null, patch.defaultRegion ?? null,
          patch.sendWindow !== undefined, sendWindowJson(patch.sendWindow), patch.responseWindowMinutes ?? null, patch.cooldownDays ?? null, patch.requireConsent ?? null,
          patch.allowedCountries === undefined ? null : [...new Set(patch.allowedCountries)]],
      );
      if (patch.smsBalance !== undefined && patch.smsBalance !== current.smsBalance) {
        const delta = patch.smsBalance - current.smsBalance;
        await recordLedgerEntry(client, { organizationId: id, kind: 'adjustment', parts: Math.abs(delta), delta, balanceAfter: patch.smsBalance, reason: 'balance set by the account admin' });
      }
      return rows[0];
    });
  }

  /** Issues a key. The secret is returned here and never again: only its hash is stored. */
  /**
   * A new key of the organization. With an Idempotency-Key (the console's), a repeat answers the first
   * key and its secret again and issues none; the saved answer holds the secret sealed under the
   * Idempotency-Key (`secretReplay`), never readable from the database alone.
   */
  async issueApiKey(input: { organizationId: string; name?: string; scopes?: string[]; secret?: string }, idempotency?: IdempotencyRequest): Promise<{ apiKey: ApiKeyRecord; secret: string; replayed: boolean }> {
    await this.getOrganization(input.organizationId);
    const errors = new FieldErrors();
    if (input.name) checkText(errors, '/name', input.name, { max: 200 });
    const scopes = input.scopes && input.scopes.length > 0 ? input.scopes : [...DEFAULT_SCOPES];
    scopes.forEach((scope, index) => {
      if (!isScope(scope)) errors.add(`/scopes/${index}`, `unknown scope ${JSON.stringify(scope)}`);
    });
    const secret = input.secret || generateApiKey();
    if (!isWellFormedApiKey(secret)) errors.add('/secret', 'is not a well-formed API key');
    errors.throwIfAny();
    const { prefix, last4 } = displayParts(secret);
    const replay = secretReplay(idempotency);
    const { result, replayed } = await runIdempotent(this.pool, replay.request, issuedKeyCodec, async (client) => {
      const { rows } = await client.query<ApiKeyRecord>(
        `INSERT INTO api_keys (id, organization_id, name, key_hash, prefix, last4, scopes)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (key_hash) DO NOTHING
         RETURNING ${KEY_COLUMNS}`,
        [uuidv7(), input.organizationId, input.name ?? '', hashApiKey(secret), prefix, last4, [...new Set(scopes)]],
      );
      if (!rows[0]) throw new ConflictError('conflict', 'this key already exists');
      return { apiKey: rows[0], sealedSecret: replay.seal(secret) };
    });
    return { apiKey: result.apiKey, secret: replayed ? replay.open(result.sealedSecret) : secret, replayed };
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
    return found(rows[0], `API key ${id}`);
  }

  /** Resolves a key to its organization and scopes; anything else is `invalid_api_key`. */
  async authenticate(secret: string): Promise<{ organization: Organization; keyId: string; scopes: string[] }> {
    if (!isWellFormedApiKey(secret)) throw new UnauthenticatedError('invalid_api_key', 'the API key is malformed');
    const { rows } = await this.pool.query<{ keyId: string; scopes: string[]; revokedAt: Date | null } & Organization>(
      // The key's columns are renamed in the subquery, so ORG_COLUMNS name the organization's alone.
      `SELECT api_key.key_id AS "keyId", api_key.scopes, api_key.revoked_at AS "revokedAt", ${ORG_COLUMNS}
         FROM (SELECT id AS key_id, organization_id, scopes, revoked_at FROM api_keys WHERE key_hash = $1) api_key
         JOIN organizations ON organizations.id = api_key.organization_id`,
      [hashApiKey(secret)],
    );
    const row = rows[0];
    if (!row) throw new UnauthenticatedError('invalid_api_key', 'the API key is not known');
    if (row.revokedAt) throw new UnauthenticatedError('invalid_api_key', 'the API key has been revoked');
    const { keyId, scopes, revokedAt: _revoked, ...organization } = row;
    return { organization, keyId, scopes };
  }

  async createLocation(input: LocationInput): Promise<Location> {
    const location = { name: input.name, address: input.address ?? '', city: input.city ?? '', timeZone: input.timeZone ?? '', reviewLinks: input.reviewLinks ?? [], sendWindow: input.sendWindow ?? null };
    await this.getOrganization(input.organizationId);
    const errors = new FieldErrors();
    checkLocation(errors, location);
    errors.throwIfAny();
    const { rows } = await this.pool.query<Location>(
      `INSERT INTO locations (id, organization_id, name, address, city, time_zone, review_links, send_window)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb) RETURNING ${LOCATION_COLUMNS}`,
      [uuidv7(), input.organizationId, location.name, location.address, location.city, location.timeZone, reviewLinksJson(location.reviewLinks), sendWindowJson(location.sendWindow)],
    );
    return rows[0];
  }

  /** A live location of the organization; another organization's or a deleted one is 404. */
  async getLocation(organizationId: string, id: string): Promise<Location> {
    const { rows } = await this.pool.query<Location>(
      `SELECT ${LOCATION_COLUMNS} FROM locations WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL`,
      [asUuid(organizationId, 'organization'), asUuid(id, 'location')],
    );
    return found(rows[0], `location ${id}`);
  }

  async updateLocation(organizationId: string, id: string, patch: LocationPatch): Promise<Location> {
    asUuid(organizationId, 'organization');
    asUuid(id, 'location');
    const errors = new FieldErrors();
    checkLocation(errors, patch);
    errors.throwIfAny();
    const { rows } = await this.pool.query<Location>(
      `UPDATE locations SET name = coalesce($3, name), address = coalesce($4, address), city = coalesce($5, city),
              time_zone = coalesce($6, time_zone), review_links = coalesce($7::jsonb, review_links),
              send_window = CASE WHEN $8::boolean THEN $9::jsonb ELSE send_window END, updated_at = now()
        WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING ${LOCATION_COLUMNS}`,
      [organizationId, id, patch.name ?? null, patch.address ?? null, patch.city ?? null, patch.timeZone ?? null,
        patch.reviewLinks ? reviewLinksJson(patch.reviewLinks) : null, patch.sendWindow !== undefined, sendWindowJson(patch.sendWindow)],
    );
    return found(rows[0], `location ${id}`);
  }

  /** Soft delete: contacts keep their reference; the location leaves lists and lookups. */
  async deleteLocation(organizationId: string, id: string): Promise<void> {
    const { rowCount } = await this.pool.query(
      'UPDATE locations SET deleted_at = now(), updated_at = now() WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL',
      [asUuid(organizationId, 'organization'), asUuid(id, 'location')],
    );
    if (!rowCount) throw new NotFoundError(`location ${id}`);
  }

  async listLocations(organizationId: string): Promise<Location[]> {
    const { rows } = await this.pool.query<Location>(
      `SELECT ${LOCATION_COLUMNS} FROM locations WHERE organization_id = $1 AND deleted_at IS NULL ORDER BY created_at, id`,
      [asUuid(organizationId, 'organization')],
    );
    return rows;
  }
}
