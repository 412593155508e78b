import { Webhook } from 'standardwebhooks';
import type { webhooks } from './generated/api';

/** The body of any event the service POSTs to a webhook endpoint, discriminated by `type`. */
export type WebhookEvent = {
  [Type in keyof webhooks]: webhooks[Type]['post']['requestBody']['content']['application/json'];
}[keyof webhooks];

/** The headers of a delivery: Node's `req.headers`, a fetch `Headers`, or a plain record. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

const SIGNED_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

function signedHeaders(headers: WebhookHeaders): Record<string, string> {
  const read = (name: string): string | undefined => {
    if (headers instanceof Headers) return headers.get(name) ?? undefined;
    const value = headers[name] ?? Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
    return Array.isArray(value) ? value.join(' ') : value;
  };
  return Object.fromEntries(SIGNED_HEADERS.flatMap((name) => {
    const value = read(name);
    return value === undefined ? [] : [[name, value]];
  }));
}

/**
 * Checks a delivery's Standard Webhooks signature (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`; any of the space-separated `v1,` values may match, as during a secret rotation)
 * and its timestamp (at most 5 minutes from this clock), then returns the parsed event. `rawBody` must be
 * the exact bytes received: re-serialized JSON does not verify. Throws standardwebhooks'
 * `WebhookVerificationError` otherwise. Deduplicate on `webhook-id` after this: delivery is at least once.
 */
export function verifyWebhook(secret: string, rawBody: string | Uint8Array, headers: WebhookHeaders): WebhookEvent {
  const body = typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8');
  return new Webhook(secret).verify(body, signedHeaders(headers)) as WebhookEvent;
}

export { WebhookVerificationError } from 'standardwebhooks';
