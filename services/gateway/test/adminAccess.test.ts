import { Redis } from 'ioredis';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { ConfigError } from '@rrs/runtime';
import { createTestDatabase, testContext, TEST_REDIS_URL, uniqueName, type TestDatabase } from '@rrs/testkit';
import { buildConfig, startGateway } from '../src';
import { ADDRESS_FAILURE_RULES } from '../src/addressLimits';

const OLD = 'adm_old_token_0123456789';
const NEW = 'adm_new_token_9876543210';

/**
 * The admin API on the internet: several tokens (rotation), wrong tokens counted per client address in
 * Redis (shared by the replicas) and answered 429 `too_many_auth_failures` with Retry-After once over the
 * limit, the right token included; each failure logged with the address. `/metrics` is not on the public port.
 */
describe('admin API access', () => {
  let db: TestDatabase;
  const ctx = testContext('gateway-admin-access');
  let contacts: RunningContacts;
  let redis: Redis;
  const prefix = `${uniqueName('gwadmin')}:`;
  let replicaA: string;
  let replicaB: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    const config = {
      host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: '127.0.0.1:1', publicBaseUrl: 'http://localhost',
      adminTokens: [OLD, NEW], redisUrl: TEST_REDIS_URL, redisKeyPrefix: prefix,
    };
    replicaA = (await startGateway(config, ctx)).url;
    replicaB = (await startGateway(config, ctx)).url;
    ctx.health.setReady(true);
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
    await ctx.stop();
    await db.drop();
  });

  const list = (base: string, token: string) => fetch(`${base}/admin/v1/organizations`, { headers: { authorization: `Bearer ${token}` } });

  it('accepts each of several tokens, so one can be rotated without a gap', async () => {
    expect((await list(replicaA, OLD)).status).toBe(200);
    expect((await list(replicaA, NEW)).status).toBe(200);
  });

  it('refuses an address after too many wrong tokens, on every replica and with the right token too, and logs it', async () => {
    const { failures } = ADDRESS_FAILURE_RULES.adminAuth;
    for (let i = 0; i < failures; i++) {
      const res = await list(i % 2 === 0 ? replicaA : replicaB, `adm_guess_${String(i).padStart(12, '0')}`);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ code: 'invalid_admin_token' });
    }
    const over = await list(replicaB, 'adm_guess_one_more_0000');
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(ADDRESS_FAILURE_RULES.adminAuth.blockSeconds - 5);
    expect(await over.json()).toMatchObject({ status: 429, code: 'too_many_auth_failures' });
    for (const base of [replicaA, replicaB]) {
      const right = await list(base, NEW);
      expect(right.status).toBe(429);
      expect(await right.json()).toMatchObject({ code: 'too_many_auth_failures' });
    }
    const logged = ctx.logger.lines.map((line) => JSON.parse(line) as { msg: string; clientAddress?: string });
    expect(logged.filter((l) => l.msg === 'admin API: wrong admin token')).toHaveLength(failures + 1);
    expect(logged.some((l) => l.msg.startsWith('admin API: client address refused') && l.clientAddress?.endsWith('127.0.0.1'))).toBe(true);
    // The block is in Redis, under the gateway's prefix.
    expect(await redis.keys(`${prefix}fail:adminAuth*`)).not.toHaveLength(0);
  });

  it('does not serve /metrics on the public port', async () => {
    const res = await fetch(`${replicaA}/metrics`);
    expect(res.status).toBe(404);
    expect(await res.text()).not.toContain('http_server_request_duration_seconds');
  });
});

describe('gateway admin and metrics settings', () => {
  it('reads ADMIN_TOKEN as one or more comma-separated tokens', () => {
    expect(buildConfig({ ADMIN_TOKEN: `${OLD}, ${NEW}` }).adminTokens).toEqual([OLD, NEW]);
    expect(buildConfig({ ADMIN_TOKEN: OLD }).adminTokens).toEqual([OLD]);
    expect(buildConfig({}).adminTokens).toBeUndefined();
    expect(() => buildConfig({ ADMIN_TOKEN: `${OLD},short` })).toThrow(/^ADMIN_TOKEN: /);
  });

  it('refuses to start with the admin API on and no ADMIN_TOKEN, naming the variable; off needs none', () => {
    for (const NODE_ENV of ['production', 'development']) {
      const err = (() => {
        try {
          buildConfig({ NODE_ENV, ADMIN_API: 'on' });
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).variable).toBe('ADMIN_TOKEN');
    }
    expect(buildConfig({ NODE_ENV: 'production', ADMIN_API: 'off', ADMIN_TOKEN: OLD }).adminTokens).toBeUndefined();
    expect(buildConfig({ NODE_ENV: 'production' }).adminTokens).toBeUndefined();
  });

  it('serves /metrics on METRICS_PORT (9472 by default)', () => {
    expect(buildConfig({})).toMatchObject({ opsPort: 9472, opsHost: '0.0.0.0', port: 8080 });
    expect(buildConfig({ METRICS_PORT: '9999', METRICS_HOST: '127.0.0.1' })).toMatchObject({ opsPort: 9999, opsHost: '127.0.0.1' });
  });
});
