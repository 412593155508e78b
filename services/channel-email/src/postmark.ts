import { PermanentSendError, providerFetch, providerJson, RetryableSendError, type ProviderCallContext, type ProviderLookup } from '@rrs/sender-kit';
import type { EmailMessage } from './message';
import type { EmailProvider } from './provider';

export interface PostmarkOptions {
  /** `https://api.postmarkapp.com` (https://postmarkapp.com/developer/api/overview). */
  baseUrl: string;
  /** The server's API token, sent as `X-Postmark-Server-Token`. */
  serverToken: string;
  /** From header; its address must be a confirmed sender signature or domain at Postmark. */
  from: string;
  /** Message stream: `outbound` (transactional, the default) or a broadcast stream's id. */
  messageStream: string;
  timeoutMs: number;
}

/** The metadata key every message carries: receipts name the message by MessageID, lookups by this. */
export const POSTMARK_STEP_METADATA = 'rrs_step_id';

interface PostmarkAnswer {
  ErrorCode?: number;
  Message?: string;
  MessageID?: string;
}

type Sorted = { kind: 'permanent'; reason: string } | { kind: 'retryable'; reason: string; retryAfterMs?: number };

/**
 * Postmark's API error codes (https://postmarkapp.com/developer/api/overview#error-codes), sorted. Codes
 * about our account or setup (10 token, 400/401 sender signature, 405/412/413 the account may not send,
 * 100 maintenance) are provider faults: the chain moves the step on to the next provider. 300 is "Invalid
 * email request", which Postmark answers for any invalid request — a From with unquoted punctuation in
 * its name, a From that is not a verified sender signature, a message without a body, an illegal
 * mailbox (https://postmarkapp.com/support/article/1180-what-does-errorcode-300-mean): mostly our own
 * configuration, so it is a provider fault that alerts (`provider_request_refused`) and never fails the
 * customer's step for good; a really bad address is refused by the next provider too. 406 is a recipient
 * Postmark has deactivated after a hard bounce or a complaint: it ends the step.
 */
export function sortPostmarkCode(code: number): Sorted {
  switch (code) {
    case 10: case 400: case 401: return { kind: 'retryable', reason: 'provider_auth_failed', retryAfterMs: 60_000 };
    case 405: case 412: case 413: return { kind: 'retryable', reason: 'provider_account_limit', retryAfterMs: 60_000 };
    case 100: return { kind: 'retryable', reason: 'provider_unavailable', retryAfterMs: 30_000 };
    case 300: return { kind: 'retryable', reason: 'provider_request_refused', retryAfterMs: 60_000 };
    case 406: return { kind: 'permanent', reason: 'recipient_inactive' };
    default: return { kind: 'permanent', reason: 'provider_rejected' };
  }
}

function headers(token: string): Record<string, string> {
  return { accept: 'application/json', 'content-type': 'application/json', 'x-postmark-server-token': token };
}

/**
 * The Postmark HTTP API: `POST {base}/email` (https://postmarkapp.com/developer/api/email-api) with our
 * HTML and text parts, the RFC 8058 unsubscribe headers and the step id in `Metadata`; the answer's
 * `MessageID` is what the delivery, bounce and complaint webhooks name. Postmark takes no idempotency
 * key, but its outbound message search filters by metadata
 * (`GET {base}/messages/outbound?metadata_rrs_step_id=…`, https://postmarkapp.com/developer/api/messages-api),
 * so a call that may have gone through is looked up before anything is sent again.
 */
export function postmarkProvider(options: PostmarkOptions): EmailProvider {
  const base = options.baseUrl.replace(/\/$/, '');
  const fail = (answer: PostmarkAnswer, status: number): never => {
    const code = Number(answer.ErrorCode);
    const message = `postmark HTTP ${status}, error ${code}: ${answer.Message ?? ''}`;
    const sorted = sortPostmarkCode(code);
    if (sorted.kind === 'permanent') throw new PermanentSendError(sorted.reason, message);
    throw new RetryableSendError(sorted.reason, message, { retryAfterMs: sorted.retryAfterMs });
  };
  return {
    name: 'postmark',
    async send(message: EmailMessage, ctx: ProviderCallContext) {
      const body = {
        From: options.from,
        To: message.to,
        Subject: message.subject,
        HtmlBody: message.html,
        TextBody: message.text,
        MessageStream: options.messageStream,
        Headers: Object.entries(message.headers).map(([Name, Value]) => ({ Name, Value })),
        Metadata: { [POSTMARK_STEP_METADATA]: ctx.idempotencyKey },
        TrackOpens: false,
        TrackLinks: 'None',
      };
      const res = await providerFetch(`${base}/email`, { method: 'POST', headers: headers(options.serverToken), body: JSON.stringify(body) }, { provider: 'postmark', timeoutMs: options.timeoutMs });
      if (res.status === 401 || res.status === 403) {
        await res.body?.cancel();
        throw new RetryableSendError('provider_auth_failed', `postmark: HTTP ${res.status}, the server token was refused`, { retryAfterMs: 60_000 });
      }
      const answer = await providerJson<PostmarkAnswer>(res, 'postmark');
      if (res.ok && answer.ErrorCode === 0 && typeof answer.MessageID === 'string' && answer.MessageID !== '') return { providerMessageId: answer.MessageID };
      if (res.ok) throw new RetryableSendError('provider_bad_response', `postmark: HTTP ${res.status} without a MessageID`, { maybeDelivered: true });
      return fail(answer, res.status);
    },
    async lookup(message: EmailMessage, ctx: ProviderCallContext): Promise<ProviderLookup> {
      const query = new URLSearchParams({ count: '1', offset: '0', recipient: message.to, [`metadata_${POSTMARK_STEP_METADATA}`]: ctx.idempotencyKey });
      const res = await providerFetch(`${base}/messages/outbound?${query}`, { method: 'GET', headers: headers(options.serverToken) }, { provider: 'postmark', timeoutMs: options.timeoutMs });
      if (!res.ok) {
        await res.body?.cancel();
        throw new RetryableSendError('provider_bad_response', `postmark message search: HTTP ${res.status}`);
      }
      const found = await providerJson<{ TotalCount?: number; Messages?: Array<{ MessageID?: string }> }>(res, 'postmark');
      const id = found.Messages?.[0]?.MessageID;
      return typeof id === 'string' && id !== '' ? { found: true, providerMessageId: id } : { found: false };
    },
    close: () => undefined,
  };
}
