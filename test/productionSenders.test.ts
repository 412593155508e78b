import { createTestDatabase, freePort, readyz, startServiceProcess, uniqueName, waitFor, type TestDatabase } from '@rrs/testkit';

/*
 * "Production never pretends" (issue 29, docs/channels.md "The sink and production"): each sender run as
 * its container runs it (`node dist/main.js`, NODE_ENV=production as in the images) with no provider
 * refuses to start, exit 78 (EX_CONFIG, as any wrong variable), with a message naming the variables to set; nothing is announced, nothing
 * consumed (the process stops before it opens the database or the bus). The sink named on purpose starts.
 */
describe.each([
  ['channel-email', {}, 'SMTP_URL: no provider is configured and NODE_ENV=production: set SMTP_URL or POSTMARK_SERVER_TOKEN (or EMAIL_PROVIDERS=sink'],
  ['channel-sms', {}, 'SMSC_LOGIN: no provider is configured and NODE_ENV=production: set SMSC_LOGIN or SMSRU_API_ID (or SMS_PROVIDERS=sink'],
  ['channel-messenger', {}, 'MAX_ID_INSTANCE: no messenger account is configured and NODE_ENV=production: set MAX_ID_INSTANCE and MAX_API_TOKEN, or TELEGRAM_ID_INSTANCE and TELEGRAM_API_TOKEN (or MESSENGER_SINK=max,telegram'],
] as const)('%s in production without a provider', (service, env, message) => {
  it('refuses to start, naming the variables to set', async () => {
    // DATABASE_URL and NATS_URL point at closed ports: the refusal comes first, so nothing is reached.
    const closed = await freePort();
    const child = startServiceProcess(service, { NODE_ENV: 'production', DATABASE_URL: `postgres://postgres@127.0.0.1:${closed}/x`, NATS_URL: `nats://127.0.0.1:${closed}`, OPS_PORT: String(await freePort()), ...env });
    expect(await child.exited).toBe(78);
    expect(child.stderr()).toContain(`${service}: invalid configuration: ${message}`);
    expect(child.output()).not.toContain('cannot reach');
  });
});

describe.each([
  ['channel-email', { EMAIL_PROVIDERS: 'sink' }],
  ['channel-sms', { SMS_PROVIDERS: 'sink' }],
  ['channel-messenger', { MESSENGER_SINK: 'max,telegram' }],
] as const)('%s in production with the sink asked for by name', (service, env) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('starts (a staging), and says in its log that messages are not delivered', async () => {
    const port = await freePort();
    const child = startServiceProcess(service, { NODE_ENV: 'production', DATABASE_URL: db.url, NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222', BUS_PREFIX: uniqueName('t'), OPS_HOST: '127.0.0.1', OPS_PORT: String(port), ...env });
    try {
      await waitFor(async () => (await readyz(port).catch(() => undefined))?.status === 200 || undefined, { what: `${service} ready`, timeoutMs: 30_000 });
      expect(child.output()).toContain('messages are not delivered');
    } finally {
      await child.stop();
    }
  });
});
