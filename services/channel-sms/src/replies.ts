import { isStopReply } from '@rrs/proto';
import { counter, type Pool } from '@rrs/runtime';
import { StepOutcome, type LoggedSend, type ResultTarget, type StepResultPublisher } from '@rrs/sender-kit';

/** The ledger source of an opt-out a person sent by SMS, or one the provider's stop list reports. */
export const STOP_REPLY = 'stop_reply';

const replies = counter({ name: 'sms_inbound_replies_total', help: 'Inbound SMS replies read from a provider, by provider and what they came to.', labelNames: ['provider', 'result'] });

/** An SMS a person sent to one of the provider's numbers. */
export interface InboundSms {
  provider: string;
  /** The sender, E.164. */
  phone: string;
  text: string;
}

export type ReplyResult = 'opted_out' | 'not_stop' | 'unknown_phone';

/**
 * Who each SMS went to, as the send log records it with the outcome (`address`, set by the SMS step's
 * result): read to find the message a reply answers.
 */
export class SmsRecipients {
  constructor(private readonly pool: Pool) {}

  /**
   * The last step this sender reported SENT to `phone` through `provider` (the rule for matching a reply,
   * docs/channels.md "STOP replies"); null when there is none.
   */
  async lastSentTo(phone: string, provider: string): Promise<LoggedSend | null> {
    const { rows } = await this.pool.query<{ step_id: string; attempt_id: string; channel: string; organization_id: string; provider_message_id: string | null; parts: number }>(
      `SELECT s.step_id, s.attempt_id, s.channel, s.organization_id, s.provider_message_id, s.parts
       FROM send_log s
       WHERE s.address = $1 AND s.state = 'done' AND s.outcome = $2 AND s.provider = $3
       ORDER BY s.updated_at DESC LIMIT 1`,
      [phone, StepOutcome.STEP_OUTCOME_SENT, provider],
    );
    const sent = rows[0];
    if (!sent) return null;
    return { stepId: sent.step_id, attemptId: sent.attempt_id, channel: sent.channel, organizationId: sent.organization_id, result: { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId: sent.provider_message_id ?? undefined, parts: sent.parts, provider } };
  }
}

/** Reports that the person behind a step opted out: the scheduler records it in the ledger (source `stop_reply`). */
export function reportStopReply(results: StepResultPublisher, target: ResultTarget, provider: string): Promise<void> {
  return results.publish(target, { outcome: StepOutcome.STEP_OUTCOME_OPTED_OUT, reason: STOP_REPLY, provider });
}

/**
 * Applies one inbound SMS: a STOP-style reply (`isStopReply`) to a number we sent an SMS through that
 * provider becomes an opt-out of the person the last such SMS went to. Applying one twice reports the
 * same opt-out twice, which the scheduler records once (per attempt and outcome).
 */
export async function applyInboundSms(reply: InboundSms, deps: { recipients: SmsRecipients; results: StepResultPublisher }): Promise<ReplyResult> {
  const result = await decide(reply, deps);
  replies.inc({ provider: reply.provider, result });
  return result;
}

async function decide(reply: InboundSms, deps: { recipients: SmsRecipients; results: StepResultPublisher }): Promise<ReplyResult> {
  if (!isStopReply(reply.text)) return 'not_stop';
  const sent = await deps.recipients.lastSentTo(reply.phone, reply.provider);
  if (!sent) return 'unknown_phone';
  await reportStopReply(deps.results, sent, reply.provider);
  return 'opted_out';
}
