import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler } from '@rrs/cascade-scheduler';
import { DEFAULT_CONNECTOR_POLICY, startConnectors, type RunningConnectors } from '@rrs/connectors';
import { startGateway } from '@rrs/gateway';
import { generateSecretKey } from '@rrs/runtime';
import { createTestBus, createTestDatabase, FakeAmoCrm, testContext, type TestBus, type TestDatabase } from '@rrs/testkit';
import { COMMANDS, runCli } from '../src';

const TOKEN = 'adm_cli_test_token_0123456789';

/** The CLI against a running gateway + contacts + cascade-scheduler + connectors, in-process, over real HTTP (amoCRM: a local fake). */
describe('admin CLI', () => {
  let db: TestDatabase;
  let bus: TestBus;
  const ctx = testContext('admin-cli');
  let contacts: RunningContacts;
  let connectors: RunningConnectors;
  let amo: FakeAmoCrm;
  let env: { ADMIN_URL: string; ADMIN_TOKEN: string };

  beforeAll(async () => {
    db = await createTestDatabase();
    bus = await createTestBus('memory');
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    const scheduler = await startScheduler(
      { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}` },
      ctx,
      { bus: bus.bus, noDispatcher: true },
    );
    connectors = await startConnectors(
      {
        databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, hooksHost: '127.0.0.1', hooksPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`,
        publicBaseUrl: 'http://hooks.test', secretKeys: [Buffer.from(generateSecretKey(), 'base64')], allowHttpCrm: true, policy: DEFAULT_CONNECTOR_POLICY,
      },
      ctx,
      { bus: bus.bus },
    );
    amo = await FakeAmoCrm.start();
    const gateway = await startGateway({
      host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`,
      connectorsAddress: `127.0.0.1:${connectors.grpcPort}`, publicBaseUrl: 'http://localhost', adminTokens: [TOKEN],
    }, ctx);
    ctx.health.setReady(true);
    env = { ADMIN_URL: gateway.url, ADMIN_TOKEN: TOKEN };
  });
  afterAll(async () => {
    await ctx.stop();
    await amo?.close();
    await bus.cleanup();
    await db.drop();
  });

  /** Runs a command; answers its exit code and the JSON it printed (stdout on success, stderr otherwise). */
  async function admin(line: string[], cliEnv: Record<string, string> = env): Promise<{ code: number; json: any; stderr: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(line, cliEnv, { out: (t) => out.push(t), err: (t) => err.push(t) });
    const text = (code === 0 ? out : err).join('\n');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { code, json, stderr: err.join('\n') };
  }

  it('runs every admin operation and prints JSON', async () => {
    const used = new Set<string>();
    const run = async (line: string[]) => {
      used.add(line[0]);
      const result = await admin(line);
      if (result.code !== 0) throw new Error(`${line.join(' ')} failed (${result.code}): ${result.stderr}`);
      return result.json;
    };

    const org = (await run(['orgs:create', '--name', 'CLI Coffee', '--plan', 'standard', '--email-confirmed', 'true', '--sms-balance', '10', '--locale', 'ru', '--time-zone', 'Europe/Moscow', '--region', 'RU'])).organization;
    expect(org).toMatchObject({ name: 'CLI Coffee', plan: 'standard', emailConfirmed: true, smsBalance: 10, locale: 'ru' });
    expect((await run(['orgs:get', '--org', org.id])).organization).toEqual(org);
    expect((await run(['orgs:list', '--limit', '500'])).organizations.map((o: { id: string }) => o.id)).toContain(org.id);
    expect((await run(['orgs:update', '--org', org.id, '--plan=pro'])).organization).toMatchObject({ plan: 'pro', name: 'CLI Coffee' });

    const issued = await run(['keys:issue', '--org', org.id, '--name', 'crm', '--scopes', 'locations:read,contacts:write']);
    expect(issued.secret).toMatch(/^rrs_/);
    expect(issued.apiKey.scopes).toEqual(['locations:read', 'contacts:write']);
    expect((await run(['keys:list', '--org', org.id])).apiKeys).toHaveLength(1);
    expect((await run(['keys:revoke', '--org', org.id, '--key', issued.apiKey.id])).apiKey.revokedAt).toEqual(expect.any(String));

    const invited = await run(['members:invite', '--org', org.id, '--email', 'owner@cli.example']);
    expect(invited.invitation).toMatchObject({ email: 'owner@cli.example', role: 'owner' });
    expect(invited.acceptUrl).toMatch(/\/app\/#\/accept\/inv_[0-9A-Za-z]{43}$/);
    expect((await run(['members:list', '--org', org.id])).members).toEqual([]);
    await contacts.members.acceptInvitation({ token: decodeURIComponent(invited.acceptUrl.split('#/accept/')[1]), name: 'Owner', password: 'owner-password-1' });
    const [member] = (await run(['members:list', '--org', org.id])).members;
    expect(member).toMatchObject({ email: 'owner@cli.example', role: 'owner', name: 'Owner' });
    expect((await run(['members:reset-password', '--org', org.id, '--member', member.id])).resetUrl).toMatch(/\/app\/#\/reset\/rst_[0-9A-Za-z]{43}$/);

    const loc = (await run(['locations:create', '--org', org.id, '--name', 'Tverskaya', '--city', 'Moscow', '--review-link', 'google=https://maps.google.com/?cid=1', '--review-link', '2gis=https://2gis.ru/firm/1'])).location;
    expect(loc.reviewLinks).toEqual([{ provider: 'google', url: 'https://maps.google.com/?cid=1' }, { provider: '2gis', url: 'https://2gis.ru/firm/1' }]);
    expect((await run(['locations:get', '--org', org.id, '--location', loc.id])).location).toEqual(loc);
    expect((await run(['locations:update', '--org', org.id, '--location', loc.id, '--address', 'Tverskaya 1', '--clear-review-links'])).location).toMatchObject({ address: 'Tverskaya 1', reviewLinks: [] });
    expect((await run(['locations:list', '--org', org.id])).locations).toHaveLength(1);
    expect(await run(['locations:delete', '--org', org.id, '--location', loc.id])).toEqual({ ok: true });

    const flow = (await run(['flows:create', '--org', org.id, '--name', 'Email then SMS', '--steps', 'EMAIL:0,SMS:60', '--default'])).flow;
    expect(flow).toMatchObject({ isDefault: true, steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }, { order: 2, channel: 'SMS', delayMinutes: 60 }] });
    const second = (await run(['flows:create', '--org', org.id, '--name', 'SMS', '--steps', 'sms'])).flow;
    expect((await run(['flows:update', '--org', org.id, '--flow', second.id, '--name', 'Max then SMS', '--steps', 'MAX:0,SMS:30'])).flow).toMatchObject({ name: 'Max then SMS', steps: [{ channel: 'MAX' }, { channel: 'SMS', delayMinutes: 30 }] });
    expect((await run(['flows:set-default', '--org', org.id, '--flow', second.id])).flow.isDefault).toBe(true);
    expect((await run(['flows:list', '--org', org.id])).flows.map((f: { id: string }) => f.id)).toEqual([second.id, flow.id]);

    expect((await run(['templates:set', '--org', org.id, '--channel', 'sms', '--body', 'Оцените нас: {{link}}'])).template).toEqual({ channel: 'SMS', subject: '', body: 'Оцените нас: {{link}}', isDefault: false });
    expect((await run(['templates:list', '--org', org.id])).templates.find((t: { channel: string }) => t.channel === 'SMS').isDefault).toBe(false);
    expect((await run(['templates:reset', '--org', org.id, '--channel', 'SMS'])).template.isDefault).toBe(true);

    expect((await run(['channels:set', '--org', org.id, '--channel', 'EMAIL', '--configured', 'true'])).channel).toEqual({ channel: 'EMAIL', configured: true });
    expect((await run(['channels:list', '--org', org.id])).channels[0]).toEqual({ channel: 'EMAIL', configured: true });

    expect(await run(['sms:credit', '--org', org.id, '--parts', '90', '--reason', 'invoice 5'])).toEqual({ balance: 100 });

    const amoToken = amo.issueLongLivedToken();
    const shop = (await run(['locations:create', '--org', org.id, '--name', 'Arbat'])).location;
    const created = await run([
      'connectors:create', '--org', org.id, '--kind', 'amocrm', '--name', 'Sales', '--amocrm-url', amo.url, '--amocrm-token', amoToken,
      '--location', shop.id, '--location-field', 'pipeline_id', '--location-map', `5512=${shop.id}`, '--won-stage', '5512/142', '--rating-field', '777001',
    ]);
    const connector = created.connector;
    expect(created.inboundUrl).toMatch(new RegExp(`^http://hooks\\.test/hooks/crm/${connector.id}/[A-Za-z0-9_-]{43}$`));
    expect(connector).toMatchObject({
      kind: 'amocrm', name: 'Sales', authMode: 'long_lived', locationId: shop.id, locationMapping: { field: 'pipeline_id', values: { '5512': shop.id } },
      wonStages: [{ pipelineId: '5512', stageId: '142' }], writeBack: { note: true, ratingField: '777001', feedbackField: null },
    });
    expect(JSON.stringify(created.connector)).not.toContain(amoToken);
    expect((await run(['connectors:list', '--org', org.id])).connectors.map((c: { id: string }) => c.id)).toEqual([connector.id]);
    expect((await run(['connectors:get', '--org', org.id, '--connector', connector.id])).connector.id).toBe(connector.id);
    const updated = await run(['connectors:update', '--org', org.id, '--connector', connector.id, '--name', 'Renamed', '--enabled', 'false', '--clear-won-stages', '--clear-location-map', '--flow', second.id, '--rotate-secret']);
    expect(updated.connector).toMatchObject({ name: 'Renamed', enabled: false, wonStages: [], locationMapping: null, flowId: second.id });
    expect(updated.inboundUrl).toMatch(new RegExp(`/hooks/crm/${connector.id}/`));
    expect(updated.inboundUrl).not.toBe(created.inboundUrl);
    expect((await run(['connectors:update', '--org', org.id, '--connector', connector.id, '--clear-flow', '--enabled', 'true'])).connector).toMatchObject({ flowId: null, enabled: true });
    expect((await run(['connectors:sync', '--org', org.id, '--connector', connector.id])).nextSyncAt).toEqual(expect.any(String));
    expect((await run(['connectors:status', '--org', org.id, '--connector', connector.id])).status).toMatchObject({ cascadesStarted: 0, failedEvents: 0 });
    expect(await run(['connectors:delete', '--org', org.id, '--connector', connector.id])).toEqual({ ok: true });
    expect((await run(['connectors:list', '--org', org.id])).connectors).toEqual([]);

    // No email sender runs here: the check says so (its passes and failures: services/gateway/test/deliverabilityApi.test.ts).
    used.add('deliverability:check');
    expect(await admin(['deliverability:check'])).toMatchObject({ code: 1, json: { status: 409, code: 'email_sender_not_running' } });

    expect([...used].sort()).toEqual(Object.keys(COMMANDS).sort());
  });

  it('prints the problem on stderr and exits 1 when the API refuses', async () => {
    const org = (await admin(['orgs:create', '--name', 'Refused'])).json.organization;
    const result = await admin(['locations:create', '--org', org.id, '--name', 'X', '--review-link', 'google=http://insecure.example']);
    expect(result.code).toBe(1);
    expect(result.json).toMatchObject({ status: 400, code: 'invalid_request', errors: [{ pointer: '/reviewLinks/0/url' }] });
    expect(await contacts.directory.listLocations(org.id)).toEqual([]);
    const crm = await admin(['connectors:create', '--org', org.id, '--kind', 'amocrm', '--amocrm-url', 'https://evil.example.com', '--amocrm-token', 'token', '--location', org.id]);
    expect(crm).toMatchObject({ code: 1, json: { status: 400, code: 'invalid_request', errors: [{ pointer: '/amocrm/baseUrl' }] } });
    expect(await connectors.connectors.list(org.id)).toEqual([]);
    const missing = await admin(['orgs:get', '--org', '0190c3c4-0000-7000-8000-000000000000']);
    expect(missing).toMatchObject({ code: 1, json: { code: 'not_found' } });
  });

  it('sends the first token of a comma-separated ADMIN_TOKEN (the gateway\'s list during a rotation)', async () => {
    const result = await admin(['orgs:list'], { ...env, ADMIN_TOKEN: `${TOKEN},adm_next_token_0123456789` });
    expect(result).toMatchObject({ code: 0 });
  });

  it('exits 1 with the problem for a wrong token', async () => {
    const result = await admin(['orgs:list'], { ...env, ADMIN_TOKEN: 'wrong-token-0123456789' });
    expect(result).toMatchObject({ code: 1, json: { status: 401, code: 'invalid_admin_token' } });
  });

  it.each<[string, string[], Record<string, string> | undefined, RegExp]>([
    ['an unknown command', ['orgs:destroy'], undefined, /unknown command/],
    ['a missing required flag', ['orgs:get'], undefined, /--org is required/],
    ['an unknown flag', ['orgs:list', '--colour', 'red'], undefined, /unknown flag --colour/],
    ['a non-integer', ['sms:credit', '--org', 'x', '--parts', 'many'], undefined, /--parts must be an integer/],
    ['a bad boolean', ['channels:set', '--org', 'x', '--channel', 'SMS', '--configured', 'yes'], undefined, /--configured must be true or false/],
    ['a flag without its value', ['orgs:get', '--org'], undefined, /--org needs a value/],
    ['malformed steps', ['flows:create', '--org', 'x', '--name', 'n', '--steps', 'EMAIL:soon'], undefined, /--steps must look like/],
    ['a review link without provider', ['locations:create', '--org', 'x', '--name', 'n', '--review-link', 'https://x'], undefined, /provider=url/],
    ['a location field without its map', ['connectors:create', '--org', 'x', '--kind', 'amocrm', '--location-field', 'pipeline_id'], undefined, /--location-field and --location-map go together/],
    ['a location map entry without a location', ['connectors:create', '--org', 'x', '--kind', 'amocrm', '--location-field', 'pipeline_id', '--location-map', '5512'], undefined, /--location-map must be value=location id/],
    ['a flow and --clear-flow', ['connectors:update', '--org', 'x', '--connector', 'y', '--flow', 'f', '--clear-flow'], undefined, /--clear-flow goes with no other value of flowId/],
    ['no ADMIN_TOKEN', ['orgs:list'], { ADMIN_URL: 'http://127.0.0.1:1' }, /ADMIN_TOKEN/],
  ])('exits 2 with a usage error for %s, without calling the API', async (_label, line, cliEnv, message) => {
    const before = (await contacts.directory.listOrganizations({ limit: 500 })).organizations.length;
    const result = await admin(line, cliEnv ?? env);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect((await contacts.directory.listOrganizations({ limit: 500 })).organizations.length).toBe(before);
  });

  it('exits 1 when the admin API cannot be reached', async () => {
    const result = await admin(['orgs:list'], { ADMIN_URL: 'http://127.0.0.1:1', ADMIN_TOKEN: TOKEN });
    expect(result).toMatchObject({ code: 1, json: { code: 'request_failed' } });
  });

  it('prints help', async () => {
    const out: string[] = [];
    expect(await runCli(['help'], env, { out: (t) => out.push(t), err: () => undefined })).toBe(0);
    for (const name of Object.keys(COMMANDS)) expect(out.join('\n')).toContain(name);
  });

  it('works as a program: main.js, compiled, in a child process', async () => {
    // Compiled to a temporary folder (not dist/) so a concurrent build of the repository is not disturbed.
    const { transformFile } = await import('@swc/core');
    const { mkdtempSync, writeFileSync, rmSync, readdirSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'rrs-admin-cli-'));
    try {
      const src = join(__dirname, '..', 'src');
      for (const file of readdirSync(src).filter((f) => f.endsWith('.ts'))) {
        const { code } = await transformFile(join(src, file), { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' }, swcrc: false });
        writeFileSync(join(dir, file.replace(/\.ts$/, '.js')), code);
      }
      const { stdout } = await promisify(execFile)(process.execPath, [join(dir, 'main.js'), 'orgs:create', '--name', 'From a child'], { env: { ...process.env, ...env }, timeout: 20_000 });
      expect(JSON.parse(stdout)).toMatchObject({ organization: { name: 'From a child', plan: 'trial' } });
      const usage = await promisify(execFile)(process.execPath, [join(dir, 'main.js'), 'orgs:get'], { env: { ...process.env, ...env } }).catch((failed: { code: number; stderr: string }) => failed);
      expect(usage).toMatchObject({ code: 2, stderr: expect.stringContaining('--org is required') });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
