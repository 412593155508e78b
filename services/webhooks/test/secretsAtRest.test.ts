import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { generateSecretKey, secretKeyId } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { buildConfig, startWebhooks, type RunningWebhooks } from '../src';
import { Receiver } from './support/receiver';
import { testWebhooksConfig } from './support/service';

/**
 * Signing secrets are sealed at rest (WEBHOOK_SECRET_KEYS) and never in saved idempotency responses,
 * while create and rotation still show the secret once, a replay shows the same one, and deliveries
 * are signed with it. Rows and saved responses written by the old code are migrated.
 */
describe('webhook signing secrets at rest', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let sql: pg.Pool;
  const receiver = new Receiver();
  const oldKey = Buffer.from(generateSecretKey(), 'base64');
  const newKey = Buffer.from(generateSecretKey(), 'base64');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    sql = new pg.Pool({ connectionString: db.url, options: '-c search_path=webhooks', max: 2 });
    await receiver.start();
  });
  afterAll(async () => {
    await sql.end();
    await receiver.stop();
    await tb.cleanup();
    await db.drop();
  });

  async function start(secretKeys: Buffer[]): Promise<{ webhooks: RunningWebhooks; stop(): Promise<void>; ctx: ReturnType<typeof testContext> }> {
    const ctx = testContext('webhooks-secrets');
    const webhooks = await startWebhooks(testWebhooksConfig(db.url, tb.prefix, { secretKeys, policy: { retryScheduleMs: [0] } }), ctx, { bus: tb.bus });
    return { webhooks, ctx, stop: () => ctx.stop() };
  }

  /** Every place in the whole database (every schema, table and column, bytea included) holding `needle`. */
  async function whereStored(needle: string): Promise<string[]> {
    const { rows: columns } = await sql.query<{ table_schema: string; table_name: string; column_name: string; data_type: string }>(
      `SELECT c.table_schema, c.table_name, c.column_name, c.data_type FROM information_schema.columns c
       JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
       WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema')`,
    );
    const found: string[] = [];
    for (const c of columns) {
      const column = `"${c.table_schema}"."${c.table_name}"."${c.column_name}"`;
      const where = c.data_type === 'bytea' ? `position(convert_to($1, 'UTF8') IN "${c.column_name}") > 0` : `"${c.column_name}"::text LIKE '%' || $1 || '%'`;
      const { rows } = await sql.query(`SELECT 1 FROM "${c.table_schema}"."${c.table_name}" WHERE ${where} LIMIT 1`, [needle]);
      if (rows.length > 0) found.push(column);
    }
    return found;
  }
  /** The secret and its key bytes (what a forger needs), searched as stored text. */
  const secretParts = (secret: string) => [secret, secret.slice('whsec_'.length)];

  it('stores no secret in readable form anywhere, shows it once, replays the same one, and signs with it', async () => {
    const svc = await start([newKey]);
    try {
      const org = randomUUID();
      const idem = (key: string) => ({ organizationId: org, key, fingerprint: `fp-${key}` });
      const created = await svc.webhooks.endpoints.create({ organizationId: org, url: receiver.url('/rest'), events: ['cascade.recipient.finished'], description: '' }, idem('create-1'));
      expect(created.secret).toMatch(/^whsec_/);
      const rotated = await svc.webhooks.endpoints.rotateSecret(org, created.endpoint.id, idem('rotate-1'));
      expect(rotated.secret).not.toBe(created.secret);

      for (const secret of [created.secret, rotated.secret]) {
        for (const part of secretParts(secret)) expect(await whereStored(part)).toEqual([]);
      }
      const { rows } = await sql.query<{ secret: string }>(`SELECT secret FROM endpoint_secrets WHERE endpoint_id = $1`, [created.endpoint.id]);
      expect(rows).toHaveLength(2);
      for (const row of rows) expect(row.secret).toMatch(new RegExp(`^sb1\\.${secretKeyId(newKey)}\\.`));
      const { rows: saved } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM idempotency_keys WHERE organization_id = $1`, [org]);
      expect(saved[0].n).toBe(2);

      // A repeat with the same key answers what the first call answered, secret included.
      const createReplay = await svc.webhooks.endpoints.create({ organizationId: org, url: receiver.url('/rest'), events: ['cascade.recipient.finished'], description: '' }, idem('create-1'));
      expect(createReplay).toMatchObject({ replayed: true, secret: created.secret, endpoint: { id: created.endpoint.id } });
      const rotateReplay = await svc.webhooks.endpoints.rotateSecret(org, created.endpoint.id, idem('rotate-1'));
      expect(rotateReplay).toMatchObject({ replayed: true, secret: rotated.secret });

      // Deliveries carry both signatures during the grace period: each secret verifies.
      const { delivery } = await svc.webhooks.endpoints.sendTestEvent(org, created.endpoint.id);
      await waitFor(() => receiver.at('/rest').length === 1, { what: 'the test delivery' });
      const [got] = receiver.at('/rest');
      expect(got.headers['webhook-id']).toBe(delivery.eventId);
      for (const secret of [created.secret, rotated.secret]) expect(() => new Webhook(secret).verify(got.body, got.headers)).not.toThrow();

      // The endpoint deleted, a replay of its creation finds nothing to show.
      await svc.webhooks.endpoints.delete(org, created.endpoint.id);
      await expect(svc.webhooks.endpoints.create({ organizationId: org, url: receiver.url('/rest'), events: ['cascade.recipient.finished'], description: '' }, idem('create-1'))).rejects.toMatchObject({ code: 'not_found' });
    } finally {
      await svc.stop();
    }
  });

  it('seals at start the secrets and saved responses the old code stored in readable form, and re-seals under a new first key', async () => {
    // What the previous version left: a plain secret, and a saved create response holding it.
    const org = randomUUID();
    const endpointId = randomUUID();
    const legacySecret = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
    const first = await start([oldKey]);
    await first.stop();
    await sql.query(`INSERT INTO endpoints (id, organization_id, url, events) VALUES ($1, $2, $3, '{cascade.recipient.finished}')`, [endpointId, org, receiver.url('/legacy')]);
    const secretRow = randomUUID();
    await sql.query(`INSERT INTO endpoint_secrets (id, endpoint_id, secret) VALUES ($1, $2, $3)`, [secretRow, endpointId, legacySecret]);
    const endpointJson = { id: endpointId, organizationId: org, url: receiver.url('/legacy'), events: ['cascade.recipient.finished'], description: '', disabled: false, disabledReason: null, disabledAt: null, failingSince: null, createdAt: new Date().toISOString(), updatedAt: new Date().toISOString(), previousSecretExpiresAt: null };
    await sql.query(
      `INSERT INTO idempotency_keys (organization_id, key, fingerprint, response, expires_at) VALUES ($1, 'legacy-create', 'fp-legacy', $2, now() + interval '1 day')`,
      [org, Buffer.from(JSON.stringify({ endpoint: endpointJson, secret: legacySecret }))],
    );
    // The saved-response migration runs with the other migrations: take 0004 back so it runs again.
    await sql.query(`DELETE FROM schema_migrations WHERE component = 'service' AND version = 4`);

    const second = await start([oldKey]);
    try {
      for (const part of secretParts(legacySecret)) expect(await whereStored(part)).toEqual([]);
      expect((await sql.query(`SELECT secret FROM endpoint_secrets WHERE id = $1`, [secretRow])).rows[0].secret).toMatch(new RegExp(`^sb1\\.${secretKeyId(oldKey)}\\.`));
      const replay = await second.webhooks.endpoints.create({ organizationId: org, url: receiver.url('/legacy'), events: ['cascade.recipient.finished'], description: '' }, { organizationId: org, key: 'legacy-create', fingerprint: 'fp-legacy' });
      expect(replay).toMatchObject({ replayed: true, secret: legacySecret, endpoint: { id: endpointId } });
    } finally {
      await second.stop();
    }

    // Rotation of the keys: a new key first, the old one after it; at start everything moves to the new key.
    const third = await start([newKey, oldKey]);
    await third.stop();
    expect((await sql.query(`SELECT secret FROM endpoint_secrets WHERE id = $1`, [secretRow])).rows[0].secret).toMatch(new RegExp(`^sb1\\.${secretKeyId(newKey)}\\.`));
    const onlyNew = await start([newKey]);
    try {
      await onlyNew.webhooks.endpoints.sendTestEvent(org, endpointId);
      await waitFor(() => receiver.at('/legacy').length === 1, { what: 'the delivery signed after the key rotation' });
      expect(() => new Webhook(legacySecret).verify(receiver.at('/legacy')[0].body, receiver.at('/legacy')[0].headers)).not.toThrow();
    } finally {
      await onlyNew.stop();
    }
  });

  it('refuses to start without WEBHOOK_SECRET_KEYS or with a key of the wrong size, naming the variable', () => {
    const env = { DATABASE_URL: 'postgres://localhost/x' };
    expect(() => buildConfig(env)).toThrow(/^WEBHOOK_SECRET_KEYS: is required/);
    expect(() => buildConfig({ ...env, WEBHOOK_SECRET_KEYS: Buffer.alloc(16).toString('base64') })).toThrow(/^WEBHOOK_SECRET_KEYS: key 1 is 16 bytes/);
    expect(buildConfig({ ...env, WEBHOOK_SECRET_KEYS: `${newKey.toString('base64')},${oldKey.toString('base64')}` }).secretKeys).toEqual([newKey, oldKey]);
  });
});
