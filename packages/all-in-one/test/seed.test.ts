import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Flows } from '@rrs/cascade-scheduler';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { createTestDatabase, testContext, testLogger, type TestDatabase } from '@rrs/testkit';
import { seedDemo } from '../src/seed';

/** The demo seed against a real contacts service; flows are recorded (the scheduler has its own tests). */
describe('demo seed', () => {
  let db: TestDatabase;
  const ctx = testContext('seed-test');
  let contacts: RunningContacts;
  let dir: string;
  const flows: Array<{ organizationId: string; isDefault: boolean; steps: Array<{ channel: string; delayMinutes: number }> }> = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    dir = mkdtempSync(join(tmpdir(), 'rrs-seed-'));
  });
  afterAll(async () => {
    await ctx.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('configures every channel, sets its own EMAIL and SMS templates, and keeps a working key', async () => {
    const recorder = { create: async (flow: (typeof flows)[number]) => flows.push(flow) } as unknown as Flows;
    const state = await seedDemo({ stateFile: join(dir, 'demo.json'), directory: contacts.directory, templates: contacts.templates, channels: contacts.channels, flows: recorder, logger: testLogger() });
    const org = state.organizationId;
    expect((await contacts.channels.list(org)).map((c) => [c.channel, c.configured])).toEqual([['EMAIL', true], ['SMS', true], ['MAX', true], ['TELEGRAM', true]]);
    const templates = await contacts.templates.list(org);
    // MAX and TELEGRAM send the SMS template, and are listed with it (docs/channels.md).
    expect(templates.filter((t) => !t.isDefault).map((t) => t.channel)).toEqual(['EMAIL', 'SMS', 'MAX', 'TELEGRAM']);
    const sms = templates.find((t) => t.channel === 'SMS')!.body;
    expect(templates.filter((t) => t.channel === 'MAX' || t.channel === 'TELEGRAM').map((t) => t.body)).toEqual([sms, sms]);
    expect(templates.every((t) => t.body.includes('{{link}}'))).toBe(true);
    expect(flows).toEqual([expect.objectContaining({ organizationId: org, isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 60 }] })]);
    expect((await contacts.directory.authenticate(state.apiKey)).organization).toMatchObject({ id: org, plan: 'standard', emailConfirmed: true, smsBalance: 1000 });

    const again = await seedDemo({ stateFile: join(dir, 'demo.json'), directory: contacts.directory, templates: contacts.templates, channels: contacts.channels, flows: recorder, logger: testLogger() });
    expect(again.organizationId).toBe(org);
    expect(flows).toHaveLength(1);
  });

  it('makes demo.json readable by its owner only on every start, not only when it creates it', async () => {
    const file = join(dir, 'demo.json');
    const recorder = { create: async () => undefined } as unknown as Flows;
    const seed = (generateAdminToken: boolean) => seedDemo({ stateFile: file, directory: contacts.directory, flows: recorder, generateAdminToken, logger: testLogger() });
    const first = await seed(true);
    expect(first.adminToken).toMatch(/^adm_\w{32}$/);
    chmodSync(file, 0o644);
    const again = await seed(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(again.adminToken).toBe(first.adminToken);
    // Tokens given (or production): the generated one is dropped from the file.
    chmodSync(file, 0o640);
    expect((await seed(false)).adminToken).toBeUndefined();
    expect(readFileSync(file, 'utf8')).not.toContain('adm_');
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });
});
