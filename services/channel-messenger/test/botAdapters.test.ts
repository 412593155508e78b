import { ConfigError } from '@rrs/runtime';
import { PermanentSendError, RetryableSendError } from '@rrs/sender-kit';
import { startFakeMaxBot, startFakeTelegramBot, type FakeMaxBot, type FakeTelegramBot } from '@rrs/testkit';
import { buildConfig, maxBot, parseMaxUpdate, parseTelegramUpdate, telegramBot, type BotAccount } from '../src';

const unlimited = { acquire: async () => undefined };
const account = (apiUrl: string, token: string): BotAccount => ({ apiUrl, token, name: 'reviews_test_bot', webhookSecret: 'secret-0123456789abcdef', timeoutMs: 2_000, perBotPerSecond: 30, perChatPerSecond: 1 });

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a failure');
}

/** The Telegram Bot API adapter against the local fake that speaks it (core.telegram.org/bots/api). */
describe('telegram bot adapter', () => {
  let fake: FakeTelegramBot;
  beforeAll(async () => {
    fake = await startFakeTelegramBot({ retryAfterSeconds: 7 });
  });
  afterAll(() => fake.close());

  it('sends with chat_id and text and returns the message id; setWebhook carries the secret_token and the update types', async () => {
    const bot = telegramBot(account(fake.url, fake.token), unlimited);
    expect(bot.link).toBe('https://t.me/reviews_test_bot');
    await expect(bot.send('42', 'hello')).resolves.toEqual({ kind: 'sent', messageId: expect.stringMatching(/^\d+$/) });
    expect(fake.messages.at(-1)).toMatchObject({ chatId: '42', text: 'hello' });
    await bot.registerWebhook('https://reviews.example/bots/telegram', 'secret-0123456789abcdef');
    expect(fake.webhook()).toEqual({ url: 'https://reviews.example/bots/telegram', secretToken: 'secret-0123456789abcdef' });
  });

  it('a blocked chat (403 "bot was blocked by the user") is gone, not an error', async () => {
    fake.block('43');
    await expect(telegramBot(account(fake.url, fake.token), unlimited).send('43', 'hi')).resolves.toEqual({ kind: 'gone', detail: 'Forbidden: bot was blocked by the user' });
  });

  it('429: retryable with parameters.retry_after; 5xx: retryable maybe delivered; 401 (a wrong token): retryable auth failure; 400: permanent', async () => {
    const bot = telegramBot(account(fake.url, fake.token), unlimited);
    fake.rateLimitNext(1);
    const refused = await failure(bot.send('44', 'x'));
    expect(refused).toBeInstanceOf(RetryableSendError);
    expect(refused).toMatchObject({ reason: 'provider_rate_limited', retryAfterMs: 7_000 });
    fake.failNext(1);
    expect(await failure(bot.send('44', 'x'))).toMatchObject({ reason: 'provider_unavailable', maybeDelivered: true });
    expect(await failure(telegramBot(account(fake.url, '999:wrong-token-xxxxxxxxxxxxxxxx'), unlimited).send('44', 'x'))).toMatchObject({ reason: 'provider_auth_failed' });
    const empty = await failure(bot.send('44', ''));
    expect(empty).toBeInstanceOf(PermanentSendError);
    expect(empty).toMatchObject({ reason: 'provider_rejected' });
  });

  it('reads /start <payload> and stop commands in private chats, and my_chat_member kicked (the bot blocked); ignores the rest', () => {
    const message = (text: string, type = 'private') => ({ update_id: 1, message: { message_id: 1, date: 1, chat: { id: 5, type }, text } });
    expect(parseTelegramUpdate(message('/start abc_DEF-123'))).toEqual({ kind: 'start', chatId: '5', payload: 'abc_DEF-123' });
    expect(parseTelegramUpdate(message('/start'))).toEqual({ kind: 'start', chatId: '5', payload: '' });
    expect(parseTelegramUpdate(message('/stop'))).toEqual({ kind: 'stop', chatId: '5', silent: false });
    expect(parseTelegramUpdate(message('СТОП'))).toEqual({ kind: 'stop', chatId: '5', silent: false });
    expect(parseTelegramUpdate(message('/start x', 'group'))).toEqual({ kind: 'ignored' });
    expect(parseTelegramUpdate(message('hello'))).toEqual({ kind: 'ignored' });
    expect(parseTelegramUpdate({ update_id: 2, my_chat_member: { chat: { id: 5, type: 'private' }, new_chat_member: { status: 'kicked' } } })).toEqual({ kind: 'stop', chatId: '5', silent: true });
    expect(parseTelegramUpdate({ update_id: 3, my_chat_member: { chat: { id: 5, type: 'private' }, new_chat_member: { status: 'member' } } })).toEqual({ kind: 'ignored' });
    expect(parseTelegramUpdate({ update_id: 4, edited_message: {} })).toEqual({ kind: 'ignored' });
  });
});

/** The MAX Bot API adapter against the local fake that speaks it (dev.max.ru/docs-api). */
describe('MAX bot adapter', () => {
  let fake: FakeMaxBot;
  beforeAll(async () => {
    fake = await startFakeMaxBot({ retryAfterSeconds: 3 });
  });
  afterAll(() => fake.close());

  it('sends POST /messages?user_id= with the token in Authorization; subscribes with the secret and the update types', async () => {
    const bot = maxBot(account(fake.url, fake.token), unlimited);
    expect(bot.link).toBe('https://max.ru/reviews_test_bot');
    await expect(bot.send('9001', 'привет')).resolves.toEqual({ kind: 'sent', messageId: expect.stringMatching(/^mid\./) });
    expect(fake.messages.at(-1)).toMatchObject({ userId: '9001', text: 'привет' });
    await bot.registerWebhook('https://reviews.example/bots/max', 'secret-0123456789abcdef');
    expect(fake.subscription()).toEqual({ url: 'https://reviews.example/bots/max', secret: 'secret-0123456789abcdef', updateTypes: ['bot_started', 'bot_stopped', 'message_created'] });
  });

  it('a user who stopped the bot (403 chat.denied) is gone; 429 retryable with Retry-After; 503 retryable; 401 auth; 400 permanent', async () => {
    const bot = maxBot(account(fake.url, fake.token), unlimited);
    fake.block('9002');
    await expect(bot.send('9002', 'x')).resolves.toMatchObject({ kind: 'gone' });
    fake.rateLimitNext(1);
    expect(await failure(bot.send('9003', 'x'))).toMatchObject({ reason: 'provider_rate_limited', retryAfterMs: 3_000 });
    fake.failNext(1);
    expect(await failure(bot.send('9003', 'x'))).toMatchObject({ reason: 'provider_unavailable', maybeDelivered: true });
    expect(await failure(maxBot(account(fake.url, 'wrong-token'), unlimited).send('9003', 'x'))).toMatchObject({ reason: 'provider_auth_failed' });
    expect(await failure(bot.send('9003', ''))).toMatchObject({ reason: 'provider_rejected' });
  });

  it('reads bot_started (payload, user_id), bot_stopped and dialog messages /start and /stop; ignores the rest', () => {
    expect(parseMaxUpdate({ update_type: 'bot_started', chat_id: 1, user: { user_id: 77 }, payload: 'code_123' })).toEqual({ kind: 'start', chatId: '77', payload: 'code_123' });
    expect(parseMaxUpdate({ update_type: 'bot_started', chat_id: 1, user: { user_id: 77 }, payload: null })).toEqual({ kind: 'start', chatId: '77', payload: '' });
    expect(parseMaxUpdate({ update_type: 'bot_stopped', chat_id: 1, user: { user_id: 77 } })).toEqual({ kind: 'stop', chatId: '77', silent: true });
    const created = (text: string, chatType = 'dialog') => ({ update_type: 'message_created', message: { sender: { user_id: 77 }, recipient: { chat_id: 1, chat_type: chatType }, body: { mid: 'm', text } } });
    expect(parseMaxUpdate(created('/stop'))).toEqual({ kind: 'stop', chatId: '77', silent: false });
    expect(parseMaxUpdate(created('/start abc'))).toEqual({ kind: 'start', chatId: '77', payload: 'abc' });
    expect(parseMaxUpdate(created('/stop', 'chat'))).toEqual({ kind: 'ignored' });
    expect(parseMaxUpdate({ update_type: 'message_callback' })).toEqual({ kind: 'ignored' });
  });
});

describe('bot config', () => {
  const base = { DATABASE_URL: 'postgres://u@localhost/db' };
  const telegram = { TELEGRAM_BOT_TOKEN: '123456:ABCdefGHIjklMNOpqrSTUvwx', TELEGRAM_BOT_NAME: 'reviews_bot', TELEGRAM_BOT_WEBHOOK_SECRET: 'secret-0123456789abcdef' };

  it('reads a bot with its token, name and secret; the API hosts default to Telegram and MAX (platform-api2)', () => {
    const config = buildConfig({ ...base, ...telegram, MAX_BOT_TOKEN: 'max-token-123', MAX_BOT_NAME: 'reviews_max_bot', MAX_BOT_WEBHOOK_SECRET: 'secret-0123456789abcdef', BOT_WEBHOOK_PUBLIC_URL: 'https://reviews.example/' });
    expect(config.bots.telegram).toMatchObject({ apiUrl: 'https://api.telegram.org', token: telegram.TELEGRAM_BOT_TOKEN, name: 'reviews_bot', perBotPerSecond: 30, perChatPerSecond: 1 });
    expect(config.bots.max).toMatchObject({ apiUrl: 'https://platform-api2.max.ru', name: 'reviews_max_bot', perChatPerSecond: 2 });
    expect(config.bots).toMatchObject({ webhookPort: 9474, webhookPublicUrl: 'https://reviews.example', schedulerAddress: '127.0.0.1:50052' });
    expect(buildConfig(base).bots.telegram).toBeUndefined();
  });

  it.each([
    ['TELEGRAM_BOT_WEBHOOK_SECRET', { TELEGRAM_BOT_TOKEN: telegram.TELEGRAM_BOT_TOKEN, TELEGRAM_BOT_NAME: 'reviews_bot' }],
    ['TELEGRAM_BOT_TOKEN', { ...telegram, TELEGRAM_BOT_TOKEN: 'no-colon' }],
    ['TELEGRAM_BOT_WEBHOOK_SECRET', { ...telegram, TELEGRAM_BOT_WEBHOOK_SECRET: 'short' }],
    ['MAX_BOT_NAME', { MAX_BOT_TOKEN: 'max-token-123', MAX_BOT_NAME: '@bad', MAX_BOT_WEBHOOK_SECRET: 'secret-0123456789abcdef' }],
    ['MAX_BOT_TOKEN', { MAX_BOT_NAME: 'reviews_max_bot' }],
  ])('names %s when it is wrong or missing', (variable, env) => {
    expect(() => buildConfig({ ...base, ...env })).toThrow(ConfigError);
    expect(() => buildConfig({ ...base, ...env })).toThrow(new RegExp(`^${variable}`));
  });
});
