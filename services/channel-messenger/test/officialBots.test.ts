import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler, type RunningScheduler } from '@rrs/cascade-scheduler';
import { startChannelCatalog, startGateway, type RunningGateway } from '@rrs/gateway';
import { createPool, type Pool } from '@rrs/runtime';
import {
  createTestBus, createTestDatabase, startFakeGreenApi, startFakeMaxBot, startFakeTelegramBot, testContext, waitFor,
  type FakeGreenApi, type FakeMaxBot, type FakeTelegramBot, type TestBus, type TestDatabase,
} from '@rrs/testkit';
import { startMessengerSender, type BotAccount, type MessengerAccount } from '../src';

const TELEGRAM_SECRET = 'tg-webhook-secret-0123456789';
const MAX_SECRET = 'max-webhook-secret-0123456789';

/**
 * The official bots on the real stack: gateway (review form, API, channel catalog) → contacts + the
 * scheduler → channel-messenger with GREEN-API working accounts and both bots, each against its fake.
 * A customer rates on the form, follows the deep link (the test posts the webhook update as the
 * platform would, with its secret), later steps go through the bot, and `/stop` or blocking the bot
 * puts the phone in the organization's opt-out ledger.
 */
describe('official bots: thank-you deep link → linked chat → sends through the bot → /stop opts out', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let contacts: RunningContacts;
  let scheduler: RunningScheduler;
  let gateway: RunningGateway;
  let greenApi: FakeGreenApi;
  let telegram: FakeTelegramBot;
  let max: FakeMaxBot;
  let messenger: Awaited<ReturnType<typeof startMessengerSender>>;
  let ledger: Pool;
  let apiKey: string;
  let organizationId: string;
  let locationId: string;
  const ctx = testContext('official-bots');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    [greenApi, telegram, max] = await Promise.all([startFakeGreenApi(), startFakeTelegramBot(), startFakeMaxBot()]);
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    scheduler = await startScheduler(
      { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40 },
      ctx,
      { bus: tb.bus, channelsCacheMs: 0 },
    );
    const account = (idInstance: string): MessengerAccount => ({ apiUrl: greenApi.url, idInstance, apiToken: greenApi.token, timeoutMs: 2_000, perAccountPerSecond: 30, perChatPerSecond: 10, healthIntervalMs: 600_000, accountCacheMs: 600_000 });
    const bot = (apiUrl: string, token: string, name: string, webhookSecret: string): BotAccount => ({ apiUrl, token, name, webhookSecret, timeoutMs: 2_000, perBotPerSecond: 30, perChatPerSecond: 10 });
    messenger = await startMessengerSender(
      {
        databaseUrl: db.url, concurrency: 4, max: account('3303'), telegram: account('4404'),
        bots: {
          telegram: bot(telegram.url, telegram.token, 'reviews_test_bot', TELEGRAM_SECRET),
          max: bot(max.url, max.token, 'reviews_max_bot', MAX_SECRET),
          webhookHost: '127.0.0.1', webhookPort: 0, webhookPublicUrl: 'https://reviews.test', schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`,
        },
      },
      ctx,
      { bus: tb.bus },
    );
    // BOT_WEBHOOK_PUBLIC_URL: the webhooks were registered at start (setWebhook / POST /subscriptions, with the secrets).
    expect(telegram.webhook()).toEqual({ url: 'https://reviews.test/bots/telegram', secretToken: TELEGRAM_SECRET });
    expect(max.subscription()).toMatchObject({ url: 'https://reviews.test/bots/max', secret: MAX_SECRET });
    // The fakes deliver to this process: point them at the local port.
    await messenger.bots.TELEGRAM!.bot.registerWebhook(`http://127.0.0.1:${messenger.botWebhookPort}/bots/telegram`, TELEGRAM_SECRET);
    await messenger.bots.MAX!.bot.registerWebhook(`http://127.0.0.1:${messenger.botWebhookPort}/bots/max`, MAX_SECRET);
    const catalog = await startChannelCatalog({ bus: tb.bus, logger: ctx.logger });
    ctx.lifecycle.onStop('catalog', () => catalog.stop());
    gateway = await startGateway({ host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, publicBaseUrl: 'http://reviews.test' }, ctx, { channelCatalog: catalog });
    ctx.health.setReady(true);
    const org = await contacts.directory.createOrganization({ name: 'Coffee Co', plan: 'standard', emailConfirmed: true, locale: 'en', defaultRegion: 'RU', smsBalance: 0, sendWindow: null, cooldownDays: 0 });
    organizationId = org.id;
    apiKey = (await contacts.directory.issueApiKey({ organizationId })).secret;
    for (const channel of ['SMS', 'MAX', 'TELEGRAM']) await contacts.channels.set({ organizationId, channel, configured: true });
    locationId = (await contacts.directory.createLocation({ organizationId, name: 'Tverskaya', address: 'Tverskaya 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [] })).id;
    ledger = createPool({ url: db.url, schema: 'scheduler' });
    await waitFor(() => catalog.list().filter((entry) => entry.botLink).length === 2, { what: 'both bots in the catalog' });
  });
  afterAll(async () => {
    await ledger?.end();
    await ctx.stop();
    await Promise.all([greenApi?.close(), telegram?.close(), max?.close()]);
    await tb?.cleanup();
    await db?.drop();
  });

  const api = (path: string, init: RequestInit = {}) => fetch(`${gateway.url}/api/v1${path}`, { ...init, headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' } });

  /** A one-step cascade on `channel` to `phone`, through the channel's send method; its step once it has an outcome. */
  async function sendVia(channel: 'max' | 'telegram', phone: string) {
    const res = await api(`/channels/${channel}/send`, { method: 'POST', body: JSON.stringify({ locationId, recipients: [{ name: 'Anna', phone }] }) });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const step = await waitFor(async () => {
      const cascade = (await (await api(`/cascades/${id}`)).json()) as { recipients: Array<{ steps: Array<{ status: string; provider: string | null; reason: string | null }> }> };
      const first = cascade.recipients[0].steps[0];
      return first.status === 'scheduled' || first.status === 'dispatched' ? undefined : first;
    }, { what: `the ${channel} step to ${phone} done` });
    return { id, step };
  }

  /** Rates the link through the form (CSRF cookie and field as a browser sends them); returns the thank-you page. */
  async function rate(token: string, rating: number): Promise<string> {
    const form = await fetch(`${gateway.url}/r/${token}`);
    const cookie = (form.headers.get('set-cookie') ?? '').split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await form.text())![1];
    const posted = await fetch(`${gateway.url}/r/${token}/rating`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf, rating: String(rating), lang: 'en' }) });
    expect(posted.status).toBe(303);
    const thanks = await fetch(`${gateway.url}/r/${token}`, { headers: { cookie } });
    expect(thanks.status).toBe(200);
    return thanks.text();
  }

  const tokenSentTo = (digits: string) => /\/r\/([0-9A-Za-z]{22})/.exec(greenApi.messages.filter((m) => m.chatId === `${digits}@c.us`).at(-1)!.message)![1];
  const deepLinks = (html: string) => Object.fromEntries([...html.matchAll(/data-channel="(\w+)"/g)].map((match) => [match[1], /href="([^"]+)"[^>]*data-channel="\w+"/.exec(html.slice(html.lastIndexOf('<a ', match.index)))![1].replace(/&amp;/g, '&')]));
  const suppression = async (phone: string) => (await ledger.query('SELECT channel, source FROM suppressions WHERE organization_id = $1 AND address = $2', [organizationId, phone])).rows[0];

  it('Telegram: the thank-you page offers both bots; /start <code> with the secret links the chat; the next TELEGRAM step goes through the bot; /stop puts the phone in the ledger and a later step is skipped opted_out', async () => {
    const phone = '+79991112201';
    const first = await sendVia('telegram', phone);
    expect(first.step).toMatchObject({ status: 'sent', provider: 'telegram' });

    const html = await rate(tokenSentTo('79991112201'), 5);
    const links = deepLinks(html);
    expect(Object.keys(links)).toEqual(['MAX', 'TELEGRAM']);
    expect(html).toContain('Get future requests in Telegram');
    const code = /^https:\/\/t\.me\/reviews_test_bot\?start=([A-Za-z0-9_-]{22})$/.exec(links.TELEGRAM)![1];
    expect(links.MAX).toMatch(/^https:\/\/max\.ru\/reviews_max_bot\?start=[A-Za-z0-9_-]{22}$/);
    // Opaque: the link says nothing about the person.
    expect(links.TELEGRAM).not.toContain('7999');

    const start = { update_id: 1, message: { message_id: 1, date: 1, chat: { id: 6100001, type: 'private' }, from: { id: 6100001, is_bot: false, first_name: 'Anna' }, text: `/start ${code}` } };
    // A wrong or missing secret: 401, nothing linked.
    expect(await telegram.deliver(start, 'wrong-secret-0123456789')).toBe(401);
    expect(await telegram.deliver(start, null)).toBe(401);
    expect(await messenger.chatLinks.find('TELEGRAM', organizationId, phone)).toBeNull();
    expect(await telegram.deliver(start)).toBe(200);
    expect(await messenger.chatLinks.find('TELEGRAM', organizationId, phone)).toMatchObject({ chatId: '6100001' });
    expect(telegram.messages.filter((m) => m.chatId === '6100001').map((m) => m.text)).toEqual([expect.stringContaining('Coffee Co will send you review requests here')]);
    // The same update again (a retried webhook) is the same link; the code in another chat is refused.
    expect(await telegram.deliver(start)).toBe(200);
    expect(await telegram.deliver({ ...start, message: { ...start.message, chat: { id: 6100999, type: 'private' } } })).toBe(200);
    expect(await messenger.chatLinks.find('TELEGRAM', organizationId, phone)).toMatchObject({ chatId: '6100001' });

    const working = greenApi.messages.length;
    // Telegram's rate limit first (429 with retry_after): the step waits and goes through the bot, once.
    telegram.rateLimitNext(1);
    const calls = telegram.calls('sendMessage');
    const viaBot = await sendVia('telegram', phone);
    expect(viaBot.step).toMatchObject({ status: 'sent', provider: 'telegram_bot' });
    expect(telegram.calls('sendMessage') - calls).toBe(2);
    expect(telegram.messages.filter((m) => m.chatId === '6100001').at(-1)!.text).toMatch(/^Tverskaya\n.*\/r\/[0-9A-Za-z]{22}/s);
    expect(greenApi.messages.length).toBe(working);
    // MAX has no link for this person: its steps still go through the working account.
    expect((await sendVia('max', phone)).step).toMatchObject({ status: 'sent', provider: 'max' });

    expect(await telegram.deliver({ update_id: 2, message: { message_id: 2, date: 2, chat: { id: 6100001, type: 'private' }, text: '/stop' } })).toBe(200);
    expect(await suppression(phone)).toEqual({ channel: 'TELEGRAM', source: 'stop_reply' });
    expect(await messenger.chatLinks.find('TELEGRAM', organizationId, phone)).toBeNull();
    const later = await sendVia('telegram', phone);
    expect(later.step).toMatchObject({ status: 'skipped', reason: 'opted_out' });
    // The thank-you page offers no bot to a person in the ledger.
    expect(deepLinks(await (await fetch(`${gateway.url}/r/${tokenSentTo('79991112201')}`)).text())).toEqual({});
  });

  it('MAX: bot_started with the payload links the user; MAX steps go through the bot (max_bot); a user who stopped the bot (403) is unlinked and opted out, the step fails bot_blocked without the working account', async () => {
    const phone = '+79991112202';
    await sendVia('max', phone);
    const links = deepLinks(await rate(tokenSentTo('79991112202'), 4));
    const code = new URL(links.MAX).searchParams.get('start')!;
    const started = { update_type: 'bot_started', timestamp: Date.now(), chat_id: 7100002, user: { user_id: 7200002, first_name: 'Anna', is_bot: false }, payload: code, user_locale: 'ru' };
    expect(await max.deliver(started, 'wrong-secret-0123456789')).toBe(401);
    expect(await messenger.chatLinks.find('MAX', organizationId, phone)).toBeNull();
    expect(await max.deliver(started)).toBe(200);
    expect(await messenger.chatLinks.find('MAX', organizationId, phone)).toMatchObject({ chatId: '7200002' });
    expect(max.subscription()).toMatchObject({ secret: MAX_SECRET, updateTypes: ['bot_started', 'bot_stopped', 'message_created'] });

    expect((await sendVia('max', phone)).step).toMatchObject({ status: 'sent', provider: 'max_bot' });
    expect(max.messages.filter((m) => m.userId === '7200002').at(-1)!.text).toContain('/r/');
    // The working account down (blocked): a linked contact still gets the bot; the page still offers it.
    greenApi.setState('3303', 'blocked');
    await messenger.health.MAX!.check();
    expect((await sendVia('max', phone)).step).toMatchObject({ status: 'sent', provider: 'max_bot' });
    greenApi.setState('3303', 'authorized');
    await messenger.health.MAX!.check();

    max.block('7200002');
    const working = greenApi.messages.length;
    const blocked = await sendVia('max', phone);
    expect(blocked.step).toMatchObject({ status: 'failed', reason: 'bot_blocked' });
    expect(greenApi.messages.length).toBe(working);
    expect(await suppression(phone)).toEqual({ channel: 'MAX', source: 'stop_reply' });
    expect(await messenger.chatLinks.find('MAX', organizationId, phone)).toBeNull();
  });

  it('an expired, unknown or malformed code links nothing and is answered 200 (the platform must not retry it); an update that is not JSON is 400', async () => {
    const phone = '+79991112203';
    await sendVia('telegram', phone);
    const code = new URL(deepLinks(await rate(tokenSentTo('79991112203'), 5)).TELEGRAM).searchParams.get('start')!;
    await ledger.query("UPDATE bot_link_codes SET expires_at = now() - interval '1 second' WHERE code = $1", [code]);
    for (const text of [`/start ${code}`, '/start AAAAAAAAAAAAAAAAAAAAAA', '/start not-a-code!', '/start']) {
      expect(await telegram.deliver({ update_id: 3, message: { message_id: 3, date: 3, chat: { id: 6100003, type: 'private' }, text } })).toBe(200);
    }
    expect(await messenger.chatLinks.ofChat('TELEGRAM', '6100003')).toEqual([]);
    const res = await fetch(`http://127.0.0.1:${messenger.botWebhookPort}/bots/telegram`, { method: 'POST', headers: { 'x-telegram-bot-api-secret-token': TELEGRAM_SECRET }, body: 'not json' });
    expect(res.status).toBe(400);
  });

  it('a staff chat linked with its code gets the rating alerts through the bot (never the customer); a blocked chat or /stop unlinks it', async () => {
    const linkStaffChat = async (chatId: number) => {
      const { code } = await scheduler.reviews.createStaffLinkCode({ organizationId, channel: 'TELEGRAM', memberId: 'member-1' });
      expect(await telegram.deliver({ update_id: 10, message: { message_id: 10, date: 10, chat: { id: chatId, type: 'private' }, text: `/start ${code!.code}` } })).toBe(200);
      expect(telegram.messages.filter((m) => m.chatId === String(chatId)).at(-1)!.text).toContain('rating alerts of Coffee Co will come to this chat');
    };
    const lowRatingWithFeedback = async (phone: string, digits: string, feedback: string) => {
      await sendVia('telegram', phone);
      const token = tokenSentTo(digits);
      await rate(token, 1);
      await scheduler.reviews.submitFeedback(token, feedback);
    };
    await linkStaffChat(6200001);
    expect((await scheduler.reviews.listStaffChats(organizationId)).chats).toEqual([expect.objectContaining({ channel: 'TELEGRAM', chatId: '6200001', linkedBy: 'member-1' })]);
    await lowRatingWithFeedback('+79991112301', '79991112301', 'The waiter was rude');
    const alert = await waitFor(() => telegram.messages.find((m) => m.chatId === '6200001' && m.text.includes('The waiter was rude')), { what: 'the alert in the staff chat' });
    expect(alert.text).toContain('★☆☆☆☆ 1/5');
    expect(alert.text).toMatch(/Open it in the inbox: http:\/\/reviews\.test\/app\/#\/ratings\/[0-9a-f-]{36}/);
    expect(greenApi.messages.some((m) => m.message.includes('The waiter was rude'))).toBe(false);
    expect(telegram.messages.filter((m) => m.text.includes('The waiter was rude')).map((m) => m.chatId)).toEqual(['6200001']);

    // The member blocked the bot: the next alert finds the chat gone, and it is unlinked.
    telegram.block('6200001');
    await lowRatingWithFeedback('+79991112302', '79991112302', 'Cold soup');
    await waitFor(async () => ((await scheduler.reviews.listStaffChats(organizationId)).chats.length === 0) || undefined, { what: 'the blocked chat unlinked' });

    // /stop in a linked staff chat ends its alerts.
    await linkStaffChat(6200002);
    expect(await telegram.deliver({ update_id: 11, message: { message_id: 11, date: 11, chat: { id: 6200002, type: 'private' }, text: '/stop' } })).toBe(200);
    expect(telegram.messages.filter((m) => m.chatId === '6200002').at(-1)!.text).toContain('This chat gets no more rating alerts.');
    expect((await scheduler.reviews.listStaffChats(organizationId)).chats).toEqual([]);
  });
});
