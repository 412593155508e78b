import { bearerToken, sameSecret, StepOutcome, type ReceiptResult, type ReceiptRoute, type SendLog, type StepOutcome as Outcome, type StepResultPublisher } from '@rrs/sender-kit';

/**
 * GREEN-API `outgoingMessageStatus` statuses that end a message
 * (https://green-api.com/v3/docs/api/receiving/notifications-format/statuses/OutgoingMessageStatus for
 * MAX, https://green-api.com/en/docs/api/receiving/notifications-format/outgoing-message/OutgoingMessageStatus
 * for the other instance types). `sent` (handed to the messenger) and `yellowCard` (sending paused for
 * spam, the message waits in the queue) end nothing.
 */
const GREENAPI_FINAL: ReadonlyMap<string, { outcome: Outcome; reason: string }> = new Map(Object.entries({
  delivered: { outcome: StepOutcome.STEP_OUTCOME_DELIVERED, reason: 'delivered' },
  read: { outcome: StepOutcome.STEP_OUTCOME_DELIVERED, reason: 'read' },
  failed: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'failed' },
  noAccount: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'no_account' },
  notInGroup: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'not_in_group' },
}));

export function mapGreenApiStatus(status: string): { outcome: Outcome; reason: string } | null {
  return GREENAPI_FINAL.get(status) ?? null;
}

interface GreenApiWebhook {
  typeWebhook?: unknown;
  instanceData?: { idInstance?: unknown };
  idMessage?: unknown;
  status?: unknown;
  timestamp?: unknown;
}

/** The receipts path of a channel's working account: `/receipts/greenapi/max`, `/receipts/greenapi/telegram`. */
export function greenApiReceiptsPath(channel: string): string {
  return `/receipts/greenapi/${channel.toLowerCase()}`;
}

/**
 * Handles one GREEN-API webhook sent to a channel's working-account URL. Only `outgoingMessageStatus`
 * is acted on (incoming messages, state changes and the rest are answered 200 and dropped: the account's
 * state is polled by AccountHealth). The message is found by `idMessage`, the id sendMessage answered and
 * the send log keeps; a webhook of another instance, or a message sent on another channel, is unknown.
 * DELIVERED is applied once per attempt, at the webhook's `timestamp`, so `read` after `delivered`
 * keeps the delivery time.
 */
export async function handleGreenApiWebhook(
  body: Buffer,
  deps: { channel: string; idInstance: string; results: StepResultPublisher; sendLog: SendLog },
): Promise<ReceiptResult> {
  let webhook: GreenApiWebhook;
  try {
    webhook = JSON.parse(body.toString('utf8')) as GreenApiWebhook;
  } catch {
    return 'bad_request';
  }
  if (typeof webhook !== 'object' || webhook === null || typeof webhook.typeWebhook !== 'string') return 'bad_request';
  if (webhook.typeWebhook !== 'outgoingMessageStatus') return 'not_final';
  if (typeof webhook.idMessage !== 'string' || webhook.idMessage === '' || typeof webhook.status !== 'string') return 'bad_request';
  const final = mapGreenApiStatus(webhook.status);
  if (!final) return 'not_final';
  const instance = webhook.instanceData?.idInstance;
  if (instance !== undefined && String(instance) !== deps.idInstance) return 'unknown_message';
  const sent = await deps.sendLog.findByProviderMessageId(webhook.idMessage);
  if (!sent || sent.channel !== deps.channel) return 'unknown_message';
  // `timestamp`: the event's time in Unix seconds; the scheduler keeps a delivery time within [sent, now].
  const at = typeof webhook.timestamp === 'number' && Number.isFinite(webhook.timestamp) && webhook.timestamp > 0 ? new Date(webhook.timestamp * 1000) : undefined;
  await deps.results.publish(sent, { outcome: final.outcome, reason: final.reason, providerMessageId: webhook.idMessage, provider: sent.result.provider, at });
  return 'recorded';
}

/**
 * The receipts route of one channel's working account, on the messenger's webhook port:
 * `POST /receipts/greenapi/<channel>`. GREEN-API signs nothing; with `webhookUrlToken` set (SetSettings)
 * it sends the token in the `Authorization` header with every webhook (`Bearer <token>`; the bare token,
 * as the v3 SetSettings page words it, is taken too), checked here (401 otherwise, the body unread).
 * GREEN-API retries an unanswered or failed webhook every minute for 24 hours.
 */
export function greenApiReceiptRoute(deps: { channel: string; idInstance: string; token: string; results: StepResultPublisher; sendLog: SendLog }): ReceiptRoute {
  const path = greenApiReceiptsPath(deps.channel);
  return {
    provider: 'greenapi',
    channel: deps.channel,
    methods: ['POST'],
    matches: (pathname) => pathname === path,
    authorize: (req) => {
      const header = req.headers.authorization ?? '';
      return sameSecret(bearerToken(header), deps.token) || sameSecret(header, deps.token);
    },
    refusedStatus: 401,
    handle: (body) => handleGreenApiWebhook(body, deps),
  };
}
