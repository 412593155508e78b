import { BOT_LINK_CODE, type schedulerV1 } from '@rrs/proto';
import { DomainError, type Logger, type PromiseClient } from '@rrs/runtime';
import type { BotClient, BotEvent } from './bots';
import type { ChatLinks, UnlinkReason } from './chatLinks';

/** What the scheduler does for the bots: claims link codes, records opt-outs, unlinks staff chats. */
export type BotScheduler = Pick<PromiseClient<schedulerV1.CascadeSchedulerServiceClient>, 'claimBotLink' | 'recordBotOptOut' | 'unlinkStaffChat'>;

export interface BotLinkingDeps {
  bot: BotClient;
  links: ChatLinks;
  scheduler: BotScheduler;
  logger: Logger;
}

export type BotEventResult = 'linked' | 'unlinked' | 'invalid_code' | 'ignored';

const REPLIES = {
  en: {
    linked: (organization: string) => `Done: ${organization || 'the business'} will send you review requests here. Send /stop to stop them.`,
    invalid: 'This link has expired or was already used. Open the review page again to get a new one.',
    hello: 'This bot sends review requests from the businesses you link it to from their review page.',
    stopped: 'You will get no more review requests here.',
    staffLinked: (organization: string) => `Done: rating alerts of ${organization || 'the business'} will come to this chat. Send /stop to stop them.`,
    staffStopped: 'This chat gets no more rating alerts.',
  },
  ru: {
    linked: (organization: string) => `Готово: ${organization || 'компания'} будет присылать запросы отзывов сюда. Чтобы отписаться, отправьте /stop.`,
    invalid: 'Ссылка устарела или уже использована. Откройте страницу отзыва ещё раз, чтобы получить новую.',
    hello: 'Этот бот присылает запросы отзывов от компаний, к которым вы подключили его со страницы отзыва.',
    stopped: 'Больше запросов отзывов здесь не будет.',
    staffLinked: (organization: string) => `Готово: уведомления об оценках ${organization || 'компании'} будут приходить в этот чат. Чтобы отключить, отправьте /stop.`,
    staffStopped: 'Уведомления об оценках в этот чат больше не приходят.',
  },
} as const;

/** A reply is a courtesy: a failure is logged, never undoes or retries what the update did. */
async function reply(deps: BotLinkingDeps, chatId: string, text: string): Promise<void> {
  try {
    await deps.bot.send(chatId, text);
  } catch (err) {
    deps.logger.warn({ err, channel: deps.bot.channel }, 'bot reply failed');
  }
}

/**
 * The person unlinks the chat: every organization it was linked for records an opt-out (the ledger's
 * source `stop_reply`, the bot's channel), then the link ends. The opt-out comes first, so a failure
 * leaves the link in place and the retried update (or send) records it again; the RPC is idempotent.
 */
export async function unlinkChat(deps: Pick<BotLinkingDeps, 'bot' | 'links' | 'scheduler'>, chatId: string, reason: UnlinkReason): Promise<number> {
  const linked = await deps.links.ofChat(deps.bot.channel, chatId);
  for (const link of linked) {
    await deps.scheduler.recordBotOptOut({ organizationId: link.organizationId, phone: link.phone, channel: link.channel, recipientId: link.recipientId });
    await deps.links.unlink(link, reason);
  }
  return linked.length;
}

/**
 * Applies one webhook update: `start` with a link code claims it at the scheduler and links the chat to
 * that organization's contact, or — a staff chat's code — to the organization's rating alerts (the
 * scheduler keeps that link); `stop` unlinks (a customer's opt-out; a staff chat stops its alerts). A code that is malformed, unknown, expired
 * or used changes nothing and is told so. A failure to reach the scheduler or the database throws, so
 * the webhook answers 503 and the platform sends the update again (a claim by the same chat is repeatable).
 */
export async function applyBotEvent(deps: BotLinkingDeps, event: BotEvent): Promise<BotEventResult> {
  if (event.kind === 'ignored') return 'ignored';
  if (event.kind === 'stop') {
    const unlinked = await unlinkChat(deps, event.chatId, event.silent ? 'bot_blocked' : 'stop_command');
    const staff = (await deps.scheduler.unlinkStaffChat({ organizationId: '', channel: deps.bot.channel, chatId: event.chatId })).unlinked;
    if (!event.silent) await reply(deps, event.chatId, staff > 0 && unlinked === 0 ? `${REPLIES.ru.staffStopped}\n${REPLIES.en.staffStopped}` : REPLIES.en.stopped + '\n' + REPLIES.ru.stopped);
    return unlinked + staff > 0 ? 'unlinked' : 'ignored';
  }
  if (event.payload === '') {
    await reply(deps, event.chatId, `${REPLIES.ru.hello}\n${REPLIES.en.hello}`);
    return 'ignored';
  }
  if (!BOT_LINK_CODE.test(event.payload)) {
    await reply(deps, event.chatId, `${REPLIES.ru.invalid}\n${REPLIES.en.invalid}`);
    return 'invalid_code';
  }
  let claimed: schedulerV1.ClaimBotLinkResponse;
  try {
    claimed = await deps.scheduler.claimBotLink({ code: event.payload, channel: deps.bot.channel, chatId: event.chatId });
  } catch (err) {
    if (!(err instanceof DomainError && err.kind === 'not_found')) throw err;
    await reply(deps, event.chatId, `${REPLIES.ru.invalid}\n${REPLIES.en.invalid}`);
    return 'invalid_code';
  }
  const locale = claimed.locale === 'ru' ? 'ru' : 'en';
  if (claimed.staff) {
    await reply(deps, event.chatId, REPLIES[locale].staffLinked(claimed.organizationName));
    return 'linked';
  }
  await deps.links.link({ channel: deps.bot.channel, organizationId: claimed.organizationId, phone: claimed.phone, chatId: event.chatId, recipientId: claimed.recipientId, locale });
  await reply(deps, event.chatId, REPLIES[locale].linked(claimed.organizationName));
  return 'linked';
}
