import type { busV1 } from '@rrs/proto';
import { PermanentSendError, RetryableSendError, StepOutcome, type SendResult } from '@rrs/sender-kit';
import type { BotClient } from './bots';
import type { ChatLink, ChatLinks } from './chatLinks';
import { renderMessengerText } from './message';

/** A channel's bot with what sending through it needs: the chat links and the unlinking (an opt-out). */
export interface BotRoute {
  bot: BotClient;
  links: Promise<ChatLinks>;
  unlink(chatId: string): Promise<number>;
}

/** The live bot chat of the step's contact, if any. The send log's database holds the links too. */
export async function linkedChat(route: BotRoute, step: busV1.StepDue, phone: string): Promise<ChatLink | null> {
  try {
    return await (await route.links).find(step.channel, step.organizationId, phone);
  } catch (err) {
    throw new RetryableSendError('chat_links_unavailable', `reading the ${step.channel} bot's chat links failed`, { cause: err });
  }
}

/**
 * Sends a linked contact's step through the bot. A chat the bot can no longer write to (the person
 * blocked or stopped it) is an unlink: the person's opt-out is recorded for every organization linked to
 * that chat and the link ends, before the step fails `bot_blocked`. The step does not fall back to the
 * working account: the person just said no in that messenger, and the ledger now says no everywhere.
 * Bot APIs take no client message id and cannot list sent messages, so a resumed step is sent again.
 */
export async function sendThroughBot(route: BotRoute, link: ChatLink, step: busV1.StepDue): Promise<SendResult> {
  const answer = await route.bot.send(link.chatId, renderMessengerText(step));
  if (answer.kind === 'sent') return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId: answer.messageId, provider: route.bot.provider };
  try {
    await route.unlink(link.chatId);
  } catch (err) {
    throw new RetryableSendError('bot_unlink_failed', `${route.bot.provider}: the chat is gone (${answer.detail}) and recording the opt-out failed`, { cause: err });
  }
  throw new PermanentSendError('bot_blocked', `${route.bot.provider}: the person blocked or stopped the bot (${answer.detail}); opted out`);
}
