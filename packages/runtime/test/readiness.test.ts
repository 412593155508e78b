import { connectJetStreamBus, createMemoryBus, Health, openBus, openServiceDatabase, StartError, watchBusConnection, type Bus } from '@rrs/runtime';
import { freePort, startPrivateNats, testContext, waitFor, type PrivateServer } from '@rrs/testkit';

/**
 * What `/readyz` says about the bus (check `nats`, from the transport's connection status), and what a
 * dependency that cannot be reached at start says: the environment variable to fix.
 */
describe('readiness of the bus connection', () => {
  it('the in-process bus is connected until it is closed', async () => {
    const bus = createMemoryBus();
    const health = new Health();
    health.setReady(true);
    watchBusConnection(health, bus);
    expect(await health.readiness()).toMatchObject({ ok: true, status: 'ready', checks: { nats: 'ok' } });
    await bus.close();
    expect(bus.isConnected()).toBe(false);
    expect(await health.readiness()).toMatchObject({ ok: false, status: 'not_ready', failing: ['nats'] });
  });

  describe('a JetStream connection to a server that goes away and comes back', () => {
    let nats: PrivateServer;
    let bus: Bus;
    const required = new Health();
    const survivable = new Health();

    beforeAll(async () => {
      nats = await startPrivateNats();
      bus = await connectJetStreamBus({ url: nats.url, prefix: 'ready', onError: () => undefined });
      for (const health of [required, survivable]) health.setReady(true);
      watchBusConnection(required, bus);
      watchBusConnection(survivable, bus, { required: false });
    });
    afterAll(async () => {
      await bus.close().catch(() => undefined);
      await nats.remove();
    });

    it('is reported lost while the server is down: not ready where the bus is required, degraded elsewhere; then ok again', async () => {
      expect(await required.readiness()).toMatchObject({ ok: true, status: 'ready', checks: { nats: 'ok' } });
      await nats.stop();
      await waitFor(() => !bus.isConnected(), { what: 'the disconnect noticed' });
      expect(await required.readiness()).toEqual({ ok: false, status: 'not_ready', checks: { nats: 'not connected to NATS (reconnecting)' }, degraded: [], failing: ['nats'] });
      expect(await survivable.readiness()).toEqual({ ok: true, status: 'degraded', checks: { nats: 'not connected to NATS (reconnecting)' }, degraded: ['nats'], failing: [] });
      await nats.start();
      await waitFor(() => bus.isConnected(), { what: 'the reconnect', timeoutMs: 15_000 });
      expect(await required.readiness()).toMatchObject({ ok: true, status: 'ready', checks: { nats: 'ok' } });
    });
  });
});

describe('a dependency that cannot be reached at start names its environment variable', () => {
  it('NATS: NATS_URL', async () => {
    const ctx = testContext();
    const port = await freePort();
    const err = await openBus({ natsUrl: `nats://user:pw@127.0.0.1:${port}`, busPrefix: 'x' }, ctx, 'test').then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(StartError);
    expect((err as StartError).variable).toBe('NATS_URL');
    expect((err as Error).message).toMatch(new RegExp(`^cannot reach NATS at nats://127\\.0\\.0\\.1:${port} \\(NATS_URL\\): `));
    // Never the credentials of the URL.
    expect((err as Error).message).not.toContain('pw');
    await ctx.stop();
  });

  it('PostgreSQL: DATABASE_URL, before any migration', async () => {
    const ctx = testContext();
    const port = await freePort();
    const err = await openServiceDatabase(ctx, { url: `postgres://postgres:secret@127.0.0.1:${port}/db`, schema: 'x', migrations: [] }).then(() => null, (e: unknown) => e);
    expect((err as StartError).variable).toBe('DATABASE_URL');
    expect((err as Error).message).toMatch(new RegExp(`^cannot reach PostgreSQL at postgres://127\\.0\\.0\\.1:${port} \\(DATABASE_URL\\): .*ECONNREFUSED`));
    expect((err as Error).message).not.toContain('secret');
    await ctx.stop();
  });
});
