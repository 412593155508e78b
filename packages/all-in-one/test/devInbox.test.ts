import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, testContext, waitFor, type TestDatabase } from '@rrs/testkit';
import { startAllInOne, type DevelopmentAllInOne } from '../src/launcher';

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
  let aio: DevelopmentAllInOne;
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

  const SINK = { name: 'sink', state: 'ok', since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) };

  it('lists the four channels of the running senders, configured for the demo organization', async () => {
    const res = await api('/channels');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      // No provider variables outside production: every channel sends through the sink, and says it does not deliver.
      channels: [
        { key: 'EMAIL', slug: 'email', label: 'Email', contactField: 'email', configured: true, sendEndpoint: '/api/v1/channels/email/send', delivers: false, providers: [SINK] },
        { key: 'SMS', slug: 'sms', label: 'SMS', contactField: 'phone', configured: true, sendEndpoint: '/api/v1/channels/sms/send', delivers: false, providers: [SINK] },
        { key: 'MAX', slug: 'max', label: 'MAX', contactField: 'phone', configured: true, sendEndpoint: '/api/v1/channels/max/send', delivers: false, providers: [SINK] },
        { key: 'TELEGRAM', slug: 'telegram', label: 'Telegram', contactField: 'phone', configured: true, sendEndpoint: '/api/v1/channels/telegram/send', delivers: false, providers: [SINK] },
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
    // The demo's Russian template fits one part whole with the link's short form (docs/channels.md, "SMS text").
    expect(sms.text).toBe(`Demo Coffee: оцените визит ${sms.link.replace('http://', '')}`);
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

  it('offers the stand-in bots after a rating: Start links the chat, the next TELEGRAM request goes through the bot into the dev inbox; /stop opts the phone out', async () => {
    const { locations } = (await (await api('/locations')).json()) as { locations: Array<{ id: string }> };
    const send = async () => {
      const res = await api('/channels/telegram/send', { method: 'POST', body: JSON.stringify({ locationId: locations[0].id, recipients: [{ name: 'Gleb', phone: '+7 916 000 11 22' }] }) });
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    };
    const inbox = async () => ((await (await fetch(`${aio.url}/dev/messages`)).json()) as { messages: Array<{ channel: string; to: string; text: string; link: string }> }).messages;
    await send();
    const first = await waitFor(async () => (await inbox()).find((m) => m.to === '+79160001122'), { what: 'the working-account message' });
    const path = new URL(first.link).pathname;
    const form = await fetch(`${aio.url}${path}`);
    const cookie = (form.headers.get('set-cookie') ?? '').split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await form.text())![1];
    const rated = await fetch(`${aio.url}${path}/rating`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf, rating: '5' }) });
    expect(rated.status).toBe(303);
    const thanks = await (await fetch(`${aio.url}${path}`, { headers: { cookie } })).text();
    const link = /href="(http:\/\/localhost:8080\/dev\/bots\/telegram\?start=[A-Za-z0-9_-]{22})"/.exec(thanks)![1];
    expect(thanks).toContain('data-channel="MAX"');

    const standIn = await fetch(`${aio.url}${new URL(link).pathname}${new URL(link).search}`);
    expect(standIn.status).toBe(200);
    const code = new URL(link).searchParams.get('start')!;
    expect(await standIn.text()).toContain(`name="code" value="${code}"`);
    const started = await fetch(`${aio.url}/dev/bots/telegram/start`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ code }) });
    expect(started.status).toBe(303);
    expect((await inbox()).find((m) => m.to === 'bot:4242')?.text).toContain('будет присылать запросы отзывов сюда');

    const second = await send();
    const viaBot = await waitFor(async () => (await inbox()).find((m) => m.to === 'bot:4242' && m.text.includes('/r/')), { what: 'the request through the stand-in bot' });
    expect(viaBot.channel).toBe('TELEGRAM');
    // The message reaches the inbox before its result reaches the scheduler.
    const provider = await waitFor(async () => {
      const cascade = (await (await api(`/cascades/${second}`)).json()) as { recipients: Array<{ steps: Array<{ provider: string | null }> }> };
      return cascade.recipients[0].steps[0].provider ?? undefined;
    }, { what: 'the step sent' });
    expect(provider).toBe('sink_bot');

    const stopped = await fetch(`${aio.url}/dev/bots/telegram/stop`, { method: 'POST', redirect: 'manual' });
    expect(stopped.status).toBe(303);
    const third = await send();
    const skipped = await waitFor(async () => {
      const body = (await (await api(`/cascades/${third}`)).json()) as { recipients: Array<{ steps: Array<{ status: string; reason: string | null }> }> };
      return body.recipients[0].steps[0].status === 'skipped' ? body.recipients[0].steps[0] : undefined;
    }, { what: 'the request after /stop skipped' });
    expect(skipped.reason).toBe('opted_out');
  });
});
