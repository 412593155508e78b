import type { ListeningHttpServer, Logger } from '@rrs/runtime';
import { basicPassword, sameSecret, startReceiptEndpoint, StepOutcome, type ReceiptResult, type SendLog, type SendResult, type StepResultPublisher } from '@rrs/sender-kit';

/**
 * Postmark bounce types (https://postmarkapp.com/developer/api/bounce-api#bounce-types) that say the
 * address is dead: the message is undelivered and the address enters the opt-out ledger (`hard_bounce`).
 */
const HARD_BOUNCES: ReadonlySet<string> = new Set(['HardBounce', 'BadEmailAddress']);
/** Bounce types that report the person, not the mailbox: a complaint or an unsubscribe request by reply. */
const OPT_OUT_BOUNCES: Readonly<Record<string, 'complaint' | 'stop_reply'>> = { SpamComplaint: 'complaint', SpamNotification: 'complaint', Unsubscribe: 'stop_reply' };
/**
 * Bounce types that end nothing: a delay Postmark still retries (`Transient`), an auto-reply, a
 * subscribe or address-change notice, a challenge or a test. Every other type (SoftBounce, DnsError,
 * Blocked, DMARCPolicy, ManuallyDeactivated, …) ends the message undelivered.
 */
const NOT_FINAL_BOUNCES: ReadonlySet<string> = new Set(['Transient', 'AutoResponder', 'AddressChange', 'Subscribe', 'ChallengeVerification', 'OpenRelayTest', 'VirusNotification', 'InboundError']);
/** `SuppressionReason` of a SubscriptionChange that turned sending off, as an opt-out source. */
const SUPPRESSIONS: Readonly<Record<string, 'hard_bounce' | 'complaint' | 'stop_reply'>> = { HardBounce: 'hard_bounce', SpamComplaint: 'complaint', ManualSuppression: 'stop_reply' };

/** `HardBounce` → `hard_bounce`, `DMARCPolicy` → `dmarc_policy`. */
function snake(type: string): string {
  return type.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2').toLowerCase();
}

interface PostmarkEvent {
  RecordType?: unknown;
  MessageID?: unknown;
  Type?: unknown;
  SuppressSending?: unknown;
  SuppressionReason?: unknown;
}

/** The step results one Postmark webhook event stands for; [] when it ends nothing. */
export function resultsOfPostmarkEvent(event: PostmarkEvent): SendResult[] {
  const type = typeof event.Type === 'string' ? event.Type : '';
  switch (event.RecordType) {
    case 'Delivery':
      return [{ outcome: StepOutcome.STEP_OUTCOME_DELIVERED, reason: 'delivered' }];
    case 'Bounce':
      if (HARD_BOUNCES.has(type)) return [{ outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'hard_bounce' }, { outcome: StepOutcome.STEP_OUTCOME_OPTED_OUT, reason: 'hard_bounce' }];
      if (OPT_OUT_BOUNCES[type]) return [{ outcome: StepOutcome.STEP_OUTCOME_OPTED_OUT, reason: OPT_OUT_BOUNCES[type] }];
      if (NOT_FINAL_BOUNCES.has(type)) return [];
      return [{ outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: type ? snake(type) : 'bounce' }];
    case 'SpamComplaint':
      return [{ outcome: StepOutcome.STEP_OUTCOME_OPTED_OUT, reason: 'complaint' }];
    case 'SubscriptionChange': {
      const source = typeof event.SuppressionReason === 'string' ? SUPPRESSIONS[event.SuppressionReason] : undefined;
      return event.SuppressSending === true && source ? [{ outcome: StepOutcome.STEP_OUTCOME_OPTED_OUT, reason: source }] : [];
    }
    default:
      // Open, Click and anything newer: nothing a step records.
      return [];
  }
}

/**
 * Handles one Postmark webhook call (https://postmarkapp.com/developer/webhooks/webhooks-overview): a
 * JSON event naming the message by `MessageID`, the id the send answered and the send log keeps.
 */
export async function handlePostmarkWebhook(body: Buffer, deps: { results: StepResultPublisher; sendLog: SendLog }): Promise<ReceiptResult> {
  let event: PostmarkEvent;
  try {
    event = JSON.parse(body.toString('utf8')) as PostmarkEvent;
  } catch {
    return 'bad_request';
  }
  if (typeof event !== 'object' || event === null || typeof event.RecordType !== 'string' || typeof event.MessageID !== 'string' || event.MessageID === '') return 'bad_request';
  const results = resultsOfPostmarkEvent(event);
  if (results.length === 0) return 'not_final';
  const sent = await deps.sendLog.findByProviderMessageId(event.MessageID);
  if (!sent) return 'unknown_message';
  for (const result of results) await deps.results.publish(sent, { ...result, providerMessageId: event.MessageID, provider: sent.result.provider });
  return 'recorded';
}

/**
 * The email receipts endpoint, on its own port (`EMAIL_RECEIPTS_PORT`): `POST /receipts/postmark`.
 * Postmark signs nothing; its webhook URL carries Basic credentials
 * (`https://postmark:<POSTMARK_WEBHOOK_SECRET>@host/receipts/postmark`), checked here (401 otherwise).
 */
export async function startEmailReceiptServer(options: { host: string; port: number; results: StepResultPublisher; sendLog: SendLog; postmarkSecret: string; logger: Logger }): Promise<ListeningHttpServer> {
  return startReceiptEndpoint({
    channel: 'EMAIL',
    host: options.host,
    port: options.port,
    logger: options.logger,
    routes: [{
      provider: 'postmark',
      methods: ['POST'],
      matches: (path) => path === '/receipts/postmark',
      authorize: (req) => sameSecret(basicPassword(req.headers.authorization), options.postmarkSecret),
      refusedStatus: 401,
      handle: (body) => handlePostmarkWebhook(body, options),
    }],
  });
}
