import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { runIdempotent, type Codec, type IdempotencyRequest } from '@rrs/idempotency';
import { connectorsV1, type CrmAuthMode } from '@rrs/proto';
import { InvalidError, inTransaction, NotFoundError, uuidv7, type Logger, type Pool, type PoolClient, type SecretBox } from '@rrs/runtime';
import type { AmoCrmAuth, AmoCrmAuthSource } from './crm/amocrm';
import type { CrmKind } from './crm/types';
import type { ReviewServices } from './reviewServices';
import { connectorMessage, type ConnectorStatusCounts } from './messages';
import {
  checkKind, checkName, checkSettings, credentialsContext, DEFAULT_WRITE_BACK, parseAmoCrmCredentials, parseBitrix24Credentials,
  type AmoCrmCredentialsInput, type Bitrix24CredentialsInput, type Connector, type ConnectorCredentials, type ConnectorSettings, type SettingsInput,
} from './model';

export const INBOX_CHANNEL = 'connectors_inbox';
export const SYNC_CHANNEL = 'connectors_sync';
export const WRITE_BACK_CHANNEL = 'connectors_write_back';

export interface CreateConnectorInput extends SettingsInput {
  organizationId: string;
  kind: string;
  name: string;
  amocrm?: AmoCrmCredentialsInput;
  bitrix24?: Bitrix24CredentialsInput;
}

export interface UpdateConnectorInput extends SettingsInput {
  name?: string;
  enabled?: boolean;
  amocrm?: AmoCrmCredentialsInput;
  bitrix24?: Bitrix24CredentialsInput;
  rotateInboundSecret?: boolean;
}


interface ConnectorRow {
  id: string;
  organization_id: string;
  kind: CrmKind;
  name: string;
  enabled: boolean;
  crm_url: string;
  auth_mode: CrmAuthMode;
  credentials: string;
  settings: ConnectorSettings;
  active_since: Date;
  sync_cursor: Date;
  next_sync_at: Date;
  last_sync_at: Date | null;
  last_event_at: Date | null;
  last_error: string | null;
  last_error_code: string | null;
  last_error_at: Date | null;
  last_success_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export function toConnector(r: ConnectorRow): Connector {
  return {
    id: r.id, organizationId: r.organization_id, kind: r.kind, name: r.name, enabled: r.enabled, crmUrl: r.crm_url, authMode: r.auth_mode,
    settings: { ...r.settings, writeBack: { ...DEFAULT_WRITE_BACK, ...r.settings.writeBack } },
    activeSince: r.active_since, syncCursor: r.sync_cursor, nextSyncAt: r.next_sync_at, lastSyncAt: r.last_sync_at, lastEventAt: r.last_event_at,
    lastError: r.last_error, lastErrorCode: r.last_error_code, lastErrorAt: r.last_error_at, lastSuccessAt: r.last_success_at, createdAt: r.created_at, updatedAt: r.updated_at,
    sealedCredentials: r.credentials,
  };
}

const hashSecret = (secret: string) => createHash('sha256').update(secret, 'utf8').digest();
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Answers of CreateConnector saved under an Idempotency-Key (the inbound URL is in them, as the only place it is shown). */
const createCodec: Codec<connectorsV1.CreateConnectorResponse> = {
  encode: (v) => connectorsV1.CreateConnectorResponse.encode(v).finish(),
  decode: (b) => connectorsV1.CreateConnectorResponse.decode(b),
};

export interface ConnectorsOptions {
  publicBaseUrl: string;
  allowHttpCrm: boolean;
}

const NO_COUNTS: ConnectorStatusCounts = { pendingEvents: 0, failedEvents: 0, cascadesStarted: 0, writeBacksPending: 0, writeBacksDone: 0, writeBacksFailed: 0, lastCascadeAt: undefined, lastWriteBackAt: undefined };

/**
 * SQL: the status's error is about the connection to the CRM (its answer), not one deal — cleared by any
 * success. Not `application_token_missing`: a reconciliation or a write-back works through the REST
 * webhook without the application token, while the CRM's events are still refused; that one is cleared
 * only by the token being given or an event coming with it (`clearMissingToken`, `update`).
 */
const CONNECTION_ERROR = `(last_error_code LIKE 'crm\\_%')`;

/** The connectors of organizations: their settings, sealed credentials, inbound secret and status. */
export class Connectors {
  constructor(
    readonly pool: Pool,
    private readonly box: SecretBox,
    private readonly reviewServices: ReviewServices,
    private readonly options: ConnectorsOptions,
    private readonly logger: Logger,
  ) {}

  inboundUrl(id: string, secret: string): string {
    return `${this.options.publicBaseUrl}/hooks/crm/${id}/${secret}`;
  }

  private parseCredentials(kind: CrmKind, input: { amocrm?: AmoCrmCredentialsInput; bitrix24?: Bitrix24CredentialsInput }) {
    if (kind === 'amocrm') {
      if (input.bitrix24) throw InvalidError.field('/bitrix24', 'an amocrm connector takes amocrm credentials');
      if (!input.amocrm) throw InvalidError.field('/amocrm', 'is required for an amocrm connector');
      return parseAmoCrmCredentials(input.amocrm, this.options.allowHttpCrm);
    }
    if (input.amocrm) throw InvalidError.field('/amocrm', 'a bitrix24 connector takes bitrix24 credentials');
    if (!input.bitrix24) throw InvalidError.field('/bitrix24', 'is required for a bitrix24 connector');
    return parseBitrix24Credentials(input.bitrix24, this.options.allowHttpCrm);
  }

  /** The location(s) and flow the settings name must be the organization's (404 naming the field). */
  private async checkReferences(organizationId: string, s: ConnectorSettings, before?: ConnectorSettings): Promise<void> {
    if (s.locationId !== '' && s.locationId !== before?.locationId) await this.reviewServices.checkLocation(organizationId, s.locationId, '/locationId');
    if (s.locationMapping && JSON.stringify(s.locationMapping) !== JSON.stringify(before?.locationMapping ?? null)) {
      for (const [value, locationId] of Object.entries(s.locationMapping.values)) {
        await this.reviewServices.checkLocation(organizationId, locationId, `/locationMapping/values/${value.replace(/~/g, '~0').replace(/\//g, '~1')}`);
      }
    }
    if (s.flowId !== '' && s.flowId !== before?.flowId) await this.reviewServices.checkFlow(organizationId, s.flowId);
  }

  async create(input: CreateConnectorInput, idempotency?: IdempotencyRequest): Promise<{ response: connectorsV1.CreateConnectorResponse; replayed: boolean }> {
    if (!UUID.test(input.organizationId)) throw InvalidError.field('/organizationId', 'must be an organization id');
    const kind = checkKind(input.kind);
    const name = checkName(input.name === '' ? kind : input.name);
    const parsed = this.parseCredentials(kind, input);
    const settings = checkSettings(kind, {
      wonStages: input.wonStages ?? [],
      locationId: input.locationId ?? '',
      locationMapping: input.locationMapping ?? null,
      flowId: input.flowId ?? '',
      writeBack: input.writeBack ?? DEFAULT_WRITE_BACK,
    });
    await this.checkReferences(input.organizationId, settings);
    const { result, replayed } = await runIdempotent(this.pool, idempotency, createCodec, async (client) => {
      const id = uuidv7();
      const secret = randomBytes(32).toString('base64url');
      const sealed = this.box.seal(JSON.stringify(parsed.credentials), credentialsContext(id));
      const { rows } = await client.query<ConnectorRow>(
        `INSERT INTO connectors (id, organization_id, kind, name, crm_url, auth_mode, credentials, inbound_secret_hash, settings, active_since, sync_cursor)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now(), now()) RETURNING *`,
        [id, input.organizationId, kind, name, parsed.crmUrl, parsed.authMode, sealed, hashSecret(secret), settings],
      );
      // The first pass is due now (next_sync_at defaults to now()): wake the reconcilers on commit, or it waits for their idle bound.
      await client.query(`SELECT pg_notify('${SYNC_CHANNEL}', '')`);
      return { connector: connectorMessage(toConnector(rows[0]), NO_COUNTS), inboundUrl: this.inboundUrl(id, secret), idempotentReplayed: false };
    });
    return { response: { ...result, idempotentReplayed: replayed }, replayed };
  }

  /** A new amoCRM connector's location and flow, checked as `create` checks them, before anything is created. */
  async checkNewSettings(organizationId: string, input: { locationId: string; flowId: string }): Promise<void> {
    if (!UUID.test(organizationId)) throw InvalidError.field('/organizationId', 'must be an organization id');
    const settings = checkSettings('amocrm', { wonStages: [], locationId: input.locationId, locationMapping: null, flowId: input.flowId, writeBack: DEFAULT_WRITE_BACK });
    await this.checkReferences(organizationId, settings);
  }

  private async row(client: Pool | PoolClient, organizationId: string, id: string, lock = false): Promise<ConnectorRow> {
    if (!UUID.test(id) || !UUID.test(organizationId)) throw new NotFoundError('connector');
    const { rows } = await client.query<ConnectorRow>(`SELECT * FROM connectors WHERE id = $1 AND organization_id = $2${lock ? ' FOR UPDATE' : ''}`, [id, organizationId]);
    if (!rows[0]) throw new NotFoundError('connector');
    return rows[0];
  }

  async get(organizationId: string, id: string): Promise<Connector> {
    return toConnector(await this.row(this.pool, organizationId, id));
  }

  async list(organizationId: string): Promise<Connector[]> {
    if (!UUID.test(organizationId)) return [];
    const { rows } = await this.pool.query<ConnectorRow>('SELECT * FROM connectors WHERE organization_id = $1 ORDER BY created_at, id', [organizationId]);
    return rows.map(toConnector);
  }

  /** A connector by id alone, for the workers; null when it was deleted. */
  async load(id: string): Promise<Connector | null> {
    const { rows } = await this.pool.query<ConnectorRow>('SELECT * FROM connectors WHERE id = $1', [id]);
    return rows[0] ? toConnector(rows[0]) : null;
  }

  async update(organizationId: string, id: string, patch: UpdateConnectorInput): Promise<{ connector: Connector; inboundUrl: string }> {
    const current = toConnector(await this.row(this.pool, organizationId, id));
    const name = patch.name === undefined ? current.name : checkName(patch.name);
    // A Bitrix24 token given alone (the console asks only for it) keeps the stored inbound webhook URL.
    const stored = patch.bitrix24 && patch.bitrix24.webhookUrl.trim() === '' && current.kind === 'bitrix24' ? this.credentials(current) : null;
    if (stored?.kind === 'bitrix24') patch = { ...patch, bitrix24: { ...patch.bitrix24!, webhookUrl: stored.webhookUrl } };
    const parsed = patch.amocrm || patch.bitrix24 ? this.parseCredentials(current.kind, patch) : null;
    const settings = checkSettings(current.kind, {
      wonStages: patch.wonStages ?? current.settings.wonStages,
      locationId: patch.locationId ?? current.settings.locationId,
      locationMapping: patch.locationMapping === undefined ? current.settings.locationMapping : patch.locationMapping,
      flowId: patch.flowId ?? current.settings.flowId,
      writeBack: patch.writeBack ?? current.settings.writeBack,
    });
    await this.checkReferences(organizationId, settings, current.settings);
    const secret = patch.rotateInboundSecret ? randomBytes(32).toString('base64url') : null;
    const row = await inTransaction(this.pool, async (client) => {
      await this.row(client, organizationId, id, true);
      const { rows } = await client.query<ConnectorRow>(
        `UPDATE connectors SET name = $2, enabled = coalesce($3, enabled), settings = $4,
           credentials = coalesce($5, credentials), crm_url = coalesce($6, crm_url), auth_mode = coalesce($7, auth_mode),
           credentials_version = credentials_version + CASE WHEN $5::text IS NULL THEN 0 ELSE 1 END,
           inbound_secret_hash = coalesce($8, inbound_secret_hash),
           -- Enabling again reconciles at once: the cursor did not move while it was off.
           next_sync_at = CASE WHEN $3::boolean AND NOT enabled THEN now() ELSE next_sync_at END,
           updated_at = now()
         WHERE id = $1 RETURNING *`,
        [id, name, patch.enabled ?? null, settings, parsed ? this.box.seal(JSON.stringify(parsed.credentials), credentialsContext(id)) : null, parsed?.crmUrl ?? null, parsed?.authMode ?? null, secret ? hashSecret(secret) : null],
      );
      if (patch.enabled === true && !current.enabled) await client.query(`SELECT pg_notify('${SYNC_CHANNEL}', '')`);
      // New credentials with an application token: the token is no longer missing.
      if (parsed?.credentials.kind === 'bitrix24' && parsed.credentials.applicationToken !== '' && rows[0].last_error_code === 'application_token_missing') {
        const cleared = await client.query<ConnectorRow>(`UPDATE connectors SET last_error = NULL, last_error_code = NULL, last_error_at = NULL WHERE id = $1 RETURNING *`, [id]);
        return cleared.rows[0];
      }
      return rows[0];
    });
    return { connector: toConnector(row), inboundUrl: secret ? this.inboundUrl(id, secret) : '' };
  }

  async delete(organizationId: string, id: string): Promise<void> {
    if (!UUID.test(id) || !UUID.test(organizationId)) throw new NotFoundError('connector');
    const { rowCount } = await this.pool.query('DELETE FROM connectors WHERE id = $1 AND organization_id = $2', [id, organizationId]);
    if (!rowCount) throw new NotFoundError('connector');
  }

  async counts(connectorId: string): Promise<ConnectorStatusCounts> {
    const { rows } = await this.pool.query<Record<string, number> & { last_cascade_at: Date | null; last_write_back_at: Date | null }>(
      `SELECT
         (SELECT count(*) FROM crm_events WHERE connector_id = $1 AND status = 'pending')::int AS pending_events,
         (SELECT count(*) FROM crm_events WHERE connector_id = $1 AND status = 'failed')::int AS failed_events,
         (SELECT count(*) FROM deal_cascades WHERE connector_id = $1)::int AS cascades_started,
         (SELECT count(*) FROM write_backs WHERE connector_id = $1 AND status = 'pending')::int AS write_backs_pending,
         (SELECT count(*) FROM write_backs WHERE connector_id = $1 AND status = 'done')::int AS write_backs_done,
         (SELECT count(*) FROM write_backs WHERE connector_id = $1 AND status = 'failed')::int AS write_backs_failed,
         (SELECT max(created_at) FROM deal_cascades WHERE connector_id = $1) AS last_cascade_at,
         (SELECT max(done_at) FROM write_backs WHERE connector_id = $1 AND status = 'done') AS last_write_back_at`,
      [connectorId],
    );
    const counts = rows[0];
    return {
      pendingEvents: counts.pending_events, failedEvents: counts.failed_events, cascadesStarted: counts.cascades_started,
      writeBacksPending: counts.write_backs_pending, writeBacksDone: counts.write_backs_done, writeBacksFailed: counts.write_backs_failed,
      lastCascadeAt: counts.last_cascade_at ?? undefined, lastWriteBackAt: counts.last_write_back_at ?? undefined,
    };
  }

  /** Reconciles the connector now (its next scheduled run is moved to now and the sync loops woken). */
  async runSync(organizationId: string, id: string): Promise<Date> {
    if (!UUID.test(id) || !UUID.test(organizationId)) throw new NotFoundError('connector');
    const { rows } = await this.pool.query<{ next_sync_at: Date }>(
      `WITH moved AS (UPDATE connectors SET next_sync_at = now() WHERE id = $1 AND organization_id = $2 RETURNING next_sync_at)
       SELECT next_sync_at, pg_notify('${SYNC_CHANNEL}', '') FROM moved`,
      [id, organizationId],
    );
    if (!rows[0]) throw new NotFoundError('connector');
    return rows[0].next_sync_at;
  }

  /** The connector whose inbound URL this is, or null (unknown id or wrong secret: the same answer). */
  async verifyInbound(id: string, secret: string): Promise<Connector | null> {
    if (!UUID.test(id) || !/^[A-Za-z0-9_-]{43}$/.test(secret)) return null;
    const { rows } = await this.pool.query<ConnectorRow & { inbound_secret_hash: Buffer }>('SELECT * FROM connectors WHERE id = $1', [id]);
    if (!rows[0]) return null;
    return timingSafeEqual(rows[0].inbound_secret_hash, hashSecret(secret)) ? toConnector(rows[0]) : null;
  }

  credentials(connector: Connector): ConnectorCredentials {
    return JSON.parse(this.box.open(connector.sealedCredentials, credentialsContext(connector.id))) as ConnectorCredentials;
  }

  /** amoCRM tokens of a connector, refreshed once for all workers when refused (see AmoCrmAuthSource). */
  amoAuthSource(connector: Connector): AmoCrmAuthSource {
    let cached = this.credentials(connector);
    const authOf = (c: ConnectorCredentials): AmoCrmAuth => {
      if (c.kind !== 'amocrm') throw new Error(`connector ${connector.id} has no amoCRM credentials`);
      return c.auth;
    };
    return {
      get: async () => authOf(cached),
      replace: async (failedAccessToken, refresh) =>
        inTransaction(this.pool, async (client) => {
          const { rows } = await client.query<{ credentials: string }>('SELECT credentials FROM connectors WHERE id = $1 FOR UPDATE', [connector.id]);
          if (!rows[0]) throw new NotFoundError('connector');
          const stored = JSON.parse(this.box.open(rows[0].credentials, credentialsContext(connector.id))) as ConnectorCredentials;
          const auth = authOf(stored);
          // Another worker refreshed while this one's request was refused: use its tokens.
          if (auth.mode !== 'oauth' || auth.accessToken !== failedAccessToken) {
            cached = stored;
            return auth;
          }
          const tokens = await refresh(auth);
          const next: ConnectorCredentials = { kind: 'amocrm', auth: { ...auth, ...tokens } };
          await client.query('UPDATE connectors SET credentials = $2, credentials_version = credentials_version + 1, updated_at = now() WHERE id = $1', [
            connector.id,
            this.box.seal(JSON.stringify(next), credentialsContext(connector.id)),
          ]);
          this.logger.info({ connectorId: connector.id }, 'amoCRM tokens refreshed');
          cached = next;
          return next.auth;
        }),
    };
  }

  /** The status's last error; a connection error is cleared by the next success (see recordSuccess). */
  async recordError(connectorId: string, code: string, message: string): Promise<void> {
    await this.pool.query('UPDATE connectors SET last_error = $2, last_error_code = $3, last_error_at = now() WHERE id = $1', [connectorId, message.slice(0, 1000), code]);
  }

  /**
   * Things worked (a deal processed, a write-back done, a reconciliation completed): the time is the
   * status's `lastSuccessAt`, and a connection error — the CRM's (`crm_*`) or a missing application
   * token — is cleared, since the connection plainly works now. A deal's own failure stays, shown as past.
   */
  async recordSuccess(connectorId: string): Promise<void> {
    await this.pool.query(
      `UPDATE connectors SET last_success_at = now(),
              last_error = CASE WHEN ${CONNECTION_ERROR} THEN NULL ELSE last_error END,
              last_error_at = CASE WHEN ${CONNECTION_ERROR} THEN NULL ELSE last_error_at END,
              last_error_code = CASE WHEN ${CONNECTION_ERROR} THEN NULL ELSE last_error_code END
        WHERE id = $1`,
      [connectorId],
    );
  }

  /** A Bitrix24 event came with the right application token: the token is no longer missing. */
  async clearMissingToken(connectorId: string): Promise<void> {
    await this.pool.query(`UPDATE connectors SET last_error = NULL, last_error_code = NULL, last_error_at = NULL WHERE id = $1 AND last_error_code = 'application_token_missing'`, [connectorId]);
  }

  /** Moves credentials sealed with an older key to the first key of CONNECTOR_SECRET_KEYS; returns how many. */
  async reencryptCredentials(): Promise<number> {
    const { rows } = await this.pool.query<{ id: string; credentials: string }>('SELECT id, credentials FROM connectors');
    let moved = 0;
    for (const r of rows) {
      if (!this.box.needsReencrypt(r.credentials)) continue;
      const { rowCount } = await this.pool.query('UPDATE connectors SET credentials = $3 WHERE id = $1 AND credentials = $2', [
        r.id,
        r.credentials,
        this.box.reencrypt(r.credentials, credentialsContext(r.id)),
      ]);
      moved += rowCount ?? 0;
    }
    if (moved > 0) this.logger.info({ moved }, 'connector credentials re-encrypted with the current key');
    return moved;
  }
}
