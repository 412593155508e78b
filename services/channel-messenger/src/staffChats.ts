import { busV1, STAFF_CHAT_DURABLE, STAFF_CHAT_SUBJECT, staffChatBusV1, staffChatMsgId, type schedulerV1 } from '@rrs/proto';
import type { Bus, BusMessage, Logger, PromiseClient, Subscription } from '@rrs/runtime';
import { PermanentSendError, ratingAlertText, RetryableSendError, StepOutcome, type SendLog } from '@rrs/sender-kit';
import type { BotClient } from './bots';

/*
 * Rating alerts to staff chats (docs/console.md, "Rating alerts"): the scheduler publishes one
 * StaffChatMessage per alert and linked chat on `steps.system.bot`; this sends it through the channel's
 * official bot, at most once per id (the send log, key `staff-chat:<id>`, as a step's). A chat the bot
 * can no longer write to (blocked, removed) is unlinked for every organization at the scheduler.
 */

export type StaffChatScheduler = Pick<PromiseClient<schedulerV1.CascadeSchedulerServiceClient>, 'unlinkStaffChat'>;

const RETRY_DELAY_MS = 5_000;

export async function startStaffChatMessages(options: {
  bus: Bus;
  sendLog: SendLog;
  bots: Partial<Record<string, BotClient>>;
  scheduler: StaffChatScheduler;
  logger: Logger;
  ackWaitMs?: number;
}): Promise<Subscription> {
  const ackWaitMs = options.ackWaitMs ?? 60_000;
  const handle = async (msg: BusMessage) => {
    let message: staffChatBusV1.StaffChatMessage;
    try {
      message = staffChatBusV1.StaffChatMessage.decode(msg.data);
    } catch (err) {
      options.logger.error({ err }, 'undecodable staff chat message dropped');
      msg.term('undecodable');
      return;
    }
    const key = staffChatMsgId(message.id);
    const entry = busV1.StepDue.fromPartial({ stepId: key, attemptId: message.id, channel: message.channel, organizationId: message.organizationId });
    const claim = await options.sendLog.claim(entry, ackWaitMs);
    if (claim.kind === 'done') return msg.ack();
    if (claim.kind === 'busy') return msg.nak(claim.retryInMs);
    const bot = options.bots[message.channel];
    try {
      if (!bot) throw new PermanentSendError('no_bot', `no ${message.channel} bot is configured for staff chats`);
      const rating = message.ratings[0];
      if (message.kind !== 'rating_alert' || !rating) throw new PermanentSendError('unknown_staff_message', `unknown staff chat message ${message.kind}`);
      const text = ratingAlertText(
        { rating: rating.rating, feedback: rating.feedback, customerName: rating.customerName, locationName: rating.locationName, ratedAt: rating.ratedAt, link: rating.link },
        { locale: message.locale, timeZone: message.timeZone, organizationName: message.organizationName },
      );
      const answer = await bot.send(message.chatId, text);
      if (answer.kind === 'gone') {
        await options.scheduler.unlinkStaffChat({ organizationId: '', channel: message.channel, chatId: message.chatId });
        throw new PermanentSendError('bot_blocked', `${bot.provider}: the staff chat is gone (${answer.detail}); unlinked`);
      }
      await options.sendLog.complete(key, { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId: answer.messageId, provider: bot.provider });
      options.logger.info({ id: message.id, channel: message.channel, provider: bot.provider }, 'staff chat alert sent');
      msg.ack();
    } catch (err) {
      if (err instanceof PermanentSendError) {
        await options.sendLog.complete(key, { outcome: StepOutcome.STEP_OUTCOME_FAILED, reason: err.reason });
        options.logger.warn({ err, id: message.id, channel: message.channel }, 'staff chat alert failed');
        msg.term(err.reason);
        return;
      }
      const retryable = err instanceof RetryableSendError ? err : undefined;
      await options.sendLog.release(key, { maybeDelivered: retryable ? retryable.maybeDelivered : true, provider: retryable?.provider });
      options.logger.warn({ err, id: message.id, delivery: msg.deliveryCount }, 'staff chat alert not sent; retrying');
      msg.nak(retryable?.retryAfterMs ?? RETRY_DELAY_MS);
    }
  };
  return options.bus.consume({ stream: 'STEPS', durable: STAFF_CHAT_DURABLE, filterSubject: STAFF_CHAT_SUBJECT, concurrency: 4, ackWaitMs }, handle);
}
