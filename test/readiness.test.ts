import { randomBytes } from 'node:crypto';
import {
  createTestDatabase, freePort, readyz, startPrivateNats, startPrivateRedis, startServiceProcess, uniqueName, waitFor,
  type PrivateServer, type ServiceProcess, type TestDatabase,
} from '@rrs/testkit';

/*
 * `/readyz` of every kind of service, run as its container runs it (`node dist/main.js`, configured by
 * env) against a private NATS and Redis that the test stops and starts: the table in docs/operations.md
 * ("Readiness"), row by row. A pod is not ready only when it cannot do its job without the dependency;
 * a dependency it survives is reported `degraded` and the pod stays ready. A dependency that cannot be
 * reached at start stops the process with a message naming the environment variable that points at it.
 */

type Dependency = 'nats' | 'redis';

interface Row {
  service: string;
  /** Which private servers it is pointed at (NATS always: every one of these uses the bus). */
  redis?: boolean;
  /** The env variable of the port `/readyz` is served on. */
  portVariable: 'PORT' | 'OPS_PORT';
  env?: Record<string, string>;
  /** The checks of a healthy pod. */
  checks: string[];
  /** Per dependency lost: the check that fails, and whether the pod stays ready (degraded). */
  losses: Array<{ dependency: Dependency; check: string; staysReady: boolean }>;
}

const SECRET_KEY = randomBytes(32).toString('base64');

const ROWS: Row[] = [
  {
    service: 'gateway', redis: true, portVariable: 'PORT', env: { HOST: '127.0.0.1' },
    checks: ['gateway-redis', 'nats'],
    losses: [{ dependency: 'redis', check: 'gateway-redis', staysReady: true }, { dependency: 'nats', check: 'nats', staysReady: true }],
  },
  {
    service: 'cascade-scheduler', portVariable: 'OPS_PORT',
    checks: ['nats', 'scheduler-postgres'],
    losses: [{ dependency: 'nats', check: 'nats', staysReady: true }],
  },
  {
    service: 'webhooks', portVariable: 'OPS_PORT', env: { WEBHOOK_SECRET_KEYS: SECRET_KEY },
    checks: ['nats', 'webhooks-postgres'],
    losses: [{ dependency: 'nats', check: 'nats', staysReady: true }],
  },
  {
    service: 'connectors', redis: true, portVariable: 'OPS_PORT', env: { CONNECTOR_SECRET_KEYS: SECRET_KEY },
    checks: ['connectors-postgres', 'connectors-redis', 'nats'],
    losses: [{ dependency: 'redis', check: 'connectors-redis', staysReady: true }, { dependency: 'nats', check: 'nats', staysReady: true }],
  },
  {
    service: 'channel-email', portVariable: 'OPS_PORT',
    checks: ['channel_email-postgres', 'nats'],
    losses: [{ dependency: 'nats', check: 'nats', staysReady: false }],
  },
  {
    service: 'channel-messenger', redis: true, portVariable: 'OPS_PORT',
    checks: ['channel-messenger-redis', 'channel_messenger-postgres', 'nats'],
    losses: [{ dependency: 'redis', check: 'channel-messenger-redis', staysReady: false }, { dependency: 'nats', check: 'nats', staysReady: false }],
  },
];

describe.each(ROWS.map((row) => [row.service, row] as const))('%s readiness', (service, row) => {
  let db: TestDatabase;
  const servers: Partial<Record<Dependency, PrivateServer>> = {};
  let child: ServiceProcess;
  let port: number;

  beforeAll(async () => {
    db = await createTestDatabase();
    servers.nats = await startPrivateNats();
    if (row.redis) servers.redis = await startPrivateRedis();
    port = await freePort();
    child = startServiceProcess(service, {
      DATABASE_URL: db.url, NATS_URL: servers.nats.url, BUS_PREFIX: uniqueName('t'), ...(servers.redis ? { REDIS_URL: servers.redis.url } : {}),
      GRPC_HOST: '127.0.0.1', GRPC_PORT: String(await freePort()), HOOKS_HOST: '127.0.0.1', HOOKS_PORT: String(await freePort()), OPS_HOST: '127.0.0.1',
      [row.portVariable]: String(port), ...row.env,
    });
  }, 60_000);
  afterAll(async () => {
    await child?.stop();
    await Promise.all(Object.values(servers).map((server) => server.remove()));
    await db?.drop();
  });

  const readiness = async () => readyz(port).catch(() => undefined);
  const whenReady = () =>
    waitFor(async () => {
      const r = await readiness();
      return r?.body.status === 'ready' && r;
    }, { what: `${service} ready`, timeoutMs: 20_000 });

  it('is ready with every dependency', async () => {
    const ready = await whenReady();
    expect(ready).toEqual({ status: 200, body: { ok: true, status: 'ready', checks: Object.fromEntries(row.checks.map((check) => [check, 'ok'])), degraded: [], failing: [] } });
  });

  it.each(row.losses.map((loss) => [loss.dependency, loss.staysReady ? 'stays ready, degraded' : 'is not ready', loss] as const))(
    'without %s it %s, and is ready again once it is back',
    async (dependency, _what, loss) => {
      await whenReady();
      await servers[dependency]!.stop();
      const lost = await waitFor(async () => {
        const r = await readiness();
        return r && [...r.body.degraded, ...r.body.failing].includes(loss.check) && r;
      }, { what: `${dependency} reported lost` });
      if (loss.staysReady) {
        expect(lost).toMatchObject({ status: 200, body: { ok: true, status: 'degraded', degraded: [loss.check], failing: [] } });
      } else {
        expect(lost).toMatchObject({ status: 503, body: { ok: false, status: 'not_ready', failing: [loss.check] } });
      }
      if (dependency === 'nats') expect(lost.body.checks.nats).toBe('not connected to NATS (reconnecting)');
      if (service === 'gateway') {
        // Still serving the API: a request without a key is answered 401, not 5xx.
        expect((await fetch(`http://127.0.0.1:${port}/api/v1/ping`)).status).toBe(401);
      }
      await servers[dependency]!.start();
      await whenReady();
    },
  );
});

/** A dependency that cannot be reached at start: exit 1, and the message names the variable to fix (never its credentials). */
describe.each([
  ['gateway', 'REDIS_URL', 'Redis', (closed: number) => ({ REDIS_URL: `redis://:hunter2@127.0.0.1:${closed}` }), 'redis'],
  ['channel-messenger', 'REDIS_URL', 'Redis', (closed: number) => ({ REDIS_URL: `redis://:hunter2@127.0.0.1:${closed}` }), 'redis'],
  ['channel-email', 'NATS_URL', 'NATS', (closed: number) => ({ NATS_URL: `nats://user:hunter2@127.0.0.1:${closed}` }), 'nats'],
  ['cascade-scheduler', 'DATABASE_URL', 'PostgreSQL', (closed: number) => ({ DATABASE_URL: `postgres://postgres:hunter2@127.0.0.1:${closed}/x` }), 'postgres'],
  ['contacts', 'DATABASE_URL', 'PostgreSQL', (closed: number) => ({ DATABASE_URL: `postgres://postgres:hunter2@127.0.0.1:${closed}/x` }), 'postgres'],
] as const)('%s cannot reach %s at start', (service, variable, what, broken, scheme) => {
  it(`exits 1 with a message naming ${variable}`, async () => {
    const db = await createTestDatabase();
    const closed = await freePort();
    try {
      const child = startServiceProcess(service, {
        DATABASE_URL: db.url, BUS_PREFIX: uniqueName('t'), PORT: String(await freePort()), GRPC_PORT: String(await freePort()), OPS_PORT: String(await freePort()),
        ...broken(closed),
      });
      expect(await child.exited).toBe(1);
      expect(child.stderr()).toContain(`${service}: failed to start: cannot reach ${what} at ${scheme}://127.0.0.1:${closed} (${variable}): `);
      expect(child.output()).not.toContain('hunter2');
    } finally {
      await db.drop();
    }
  });
});
