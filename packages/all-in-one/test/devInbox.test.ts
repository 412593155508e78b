import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, testContext, waitFor, type TestDatabase } from '@rrs/testkit';
import { startAllInOne, type RunningAllInOne } from '../src/launcher';

// The test gives a DATABASE_URL, so embedded PostgreSQL (an ES module jest cannot load) is never started.
jest.mock('../src/embeddedPostgres', () => ({
  startEmbeddedPostgres: () => Promise.reject(new Error('embedded PostgreSQL is not used in this test')),
}));

/**
 * The all-in-one wiring of the channels: every sender announces its channel, the gateway's catalog and
 * send endpoints come from those announcements, and the sink providers' messages show in the dev inbox.
 */
describe('all-in-one channels and dev inbox', () => {
  let db: TestDatabase;
  let dir: string;
  let aio: RunningAllInOne;
  const ctx = testContext('aio-channels');

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'rrs-aio-ch-'));
    aio = await startAllInOne({ host: '127.0.0.1', port: 0, dataDir: dir, databaseUrl: db.url, embeddedPostgresPort: 0, publicBaseUrl: 'http://localhost:8080', minuteMs: 60_000, allowHttpCrm: false, production: false, adminTokens: 'generate', opsHost: '127.0.0.1', opsPort: 0, logLevel: 'warn' }, ctx);
    ctx.health.setReady(true);
  });
  afterAll(async () => {
    await ctx.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${aio.url}/api/v1${path}`, { ...init, headers: { authorization: `Bearer ${aio.demo.apiKey}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });

  it('lists the four channels of the running senders, configured for the demo organization', async () => {
    const res = await api('/channels');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      channels: [
        { key: 'EMAIL', slug: 'email', label: 'Email', contactField: 'email', configured: true, sendEndpoint: '/api/v1/channels/email/send' },
        { key: 'SMS', slug: 'sms', label: 'SMS', contactField: 'phone', configured: true, sendEndpoint: '/api/v1/channels/sms/send' },
        { key: 'MAX', slug: 'max', label: 'MAX', contactField: 'phone', configured: true, sendEndpoint: '/api/v1/channels/max/send' },
        { key: 'TELEGRAM', slug: 'telegram', label: 'Telegram', contactField: 'phone', configured: true, sendEndpoint: '/api/v1/channels/telegram/send' },
      ],
    });
  });

  it('shows a channel send in GET /dev/messages and on the /dev/inbox page', async () => {
    const { locations } = (await (await api('/locations')).json()) as { locations: Array<{ id: string }> };
    for (const [slug, recipient] of [['sms', { name: 'Анна', phone: '8 916 123-45-67' }], ['telegram', { name: 'Boris', phone: '+7 916 765 43 21' }], ['email', { name: 'Vera', email: 'vera@example.com' }]] as const) {
      const res = await api(`/channels/${slug}/send`, { method: 'POST', body: JSON.stringify({ locationId: locations[0].id, recipients: [recipient] }) });
      expect(res.status).toBe(202);
    }
    const messages = await waitFor(async () => {
      const body = (await (await fetch(`${aio.url}/dev/messages`)).json()) as { messages: Array<{ channel: string; to: string; text: string; link: string; sentAt: string }> };
      return body.messages.length >= 3 ? body.messages : undefined;
    }, { what: 'three messages in the dev inbox' });
    const sms = messages.find((m) => m.channel === 'SMS')!;
    expect(sms).toMatchObject({ to: '+79161234567', link: expect.stringMatching(/^http:\/\/localhost:8080\/r\/\w+$/) });
    expect(sms.text).toContain(sms.link);
    expect(sms.text.length).toBeLessThanOrEqual(70);
    const tg = messages.find((m) => m.channel === 'TELEGRAM')!;
    expect(tg.to).toBe('+79167654321');
    expect(tg.text.split('\n')[0]).not.toContain('http');
    expect(tg.text).toContain(tg.link);
    expect(messages.find((m) => m.channel === 'EMAIL')).toMatchObject({ to: 'vera@example.com' });
    const page = await fetch(`${aio.url}/dev/inbox`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Dev inbox');
    expect(html).toContain(`<a href="${sms.link}">`);
  });
});
