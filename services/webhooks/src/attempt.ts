import { SpanStatusCode, type Span } from '@opentelemetry/api';
import { counter, extractTraceContext, histogram, LATENCY_BUCKETS, SpanKind, withSpan, type Logger, type Pool, type SecretBox } from '@rrs/runtime';
import { judgeAttempt, recordAttempt, type ClaimedDelivery, type DeliveryPolicy } from './deliveries';
import { openLiveSecrets } from './secrets';
import { postWebhook, type SendResult } from './sender';
import { signatureHeader } from './signing';
import type { UrlGuard } from './urlGuard';

const attemptsTotal = counter({ name: 'webhook_attempts_total', help: 'Webhook delivery attempts, by outcome.', labelNames: ['outcome'] });
const attemptSeconds = histogram({ name: 'webhook_attempt_duration_seconds', help: 'Duration of webhook delivery attempts.', labelNames: ['outcome'], buckets: [...LATENCY_BUCKETS, 15, 30] });
const endpointsDisabled = counter({ name: 'webhook_endpoints_disabled_total', help: 'Endpoints disabled by delivery failures, by reason.', labelNames: ['reason'] });

export interface AttemptDeps {
  pool: Pool;
  guard: UrlGuard;
  policy: DeliveryPolicy;
  logger: Logger;
  /** Opens the stored signing secrets (WEBHOOK_SECRET_KEYS). */
  box: SecretBox;
  /** See WebhookRequest.ca. */
  trustedCa?: string[];
}

/**
 * One attempt of a claimed delivery: signed POST, verdict, record. It runs in a CLIENT span whose parent
 * is the context the delivery was queued in (the event's trace), whichever worker makes it and however
 * late. The span is ours only: the request to the receiver carries no trace headers.
 */
export function attemptDelivery(claim: ClaimedDelivery, deps: AttemptDeps): Promise<void> {
  return withSpan(
    'deliver webhook',
    {
      'http.request.method': 'POST',
      'server.address': hostOf(claim.url),
      'rrs.delivery_id': claim.id,
      'rrs.endpoint_id': claim.endpointId,
      'rrs.event_id': claim.eventId,
      'rrs.event_type': claim.eventType,
      'rrs.webhook.attempt': claim.attemptNumber,
    },
    (span) => attemptIn(span, claim, deps),
    { kind: SpanKind.CLIENT, parent: extractTraceContext(claim.traceContext) },
  );
}

async function attemptIn(span: Span, claim: ClaimedDelivery, { guard, policy, pool, logger, box, trustedCa }: AttemptDeps): Promise<void> {
  const started = new Date();
  const timestamp = Math.floor(started.getTime() / 1000);
  const secrets = openLiveSecrets(box, claim.endpointId, claim.secrets, logger);
  // Nothing is sent unsigned: with no secret that opens, the attempt fails (and is retried: the key may come back).
  const result: SendResult =
    secrets.length === 0
      ? { kind: 'error', error: 'secret_unreadable: the signing secret does not open with the configured keys', durationMs: 0 }
      : await postWebhook(guard, {
          url: claim.url,
          body: claim.body,
          timeoutMs: policy.timeoutMs,
          ca: trustedCa,
          headers: {
            // The event id: the same on every attempt, so receivers can drop repeats.
            'webhook-id': claim.eventId,
            'webhook-timestamp': String(timestamp),
            'webhook-signature': signatureHeader(secrets, claim.eventId, timestamp, claim.body),
          },
        });
  const verdict = judgeAttempt(result, policy, claim.retryIndex + 1);
  span.setAttribute('rrs.webhook.outcome', verdict.outcome);
  if (result.kind === 'response') span.setAttribute('http.response.status_code', result.status);
  if (verdict.outcome !== 'delivered') span.setStatus({ code: SpanStatusCode.ERROR, message: result.kind === 'response' ? `HTTP ${result.status}` : result.error });
  const { held, endpointDisabled } = await recordAttempt(pool, claim, started, result, verdict, policy);
  attemptsTotal.inc({ outcome: verdict.outcome });
  attemptSeconds.observe({ outcome: verdict.outcome }, result.durationMs / 1000);
  if (endpointDisabled) endpointsDisabled.inc({ reason: endpointDisabled });
  logger.info(
    {
      deliveryId: claim.id,
      endpointId: claim.endpointId,
      eventId: claim.eventId,
      attempt: claim.attemptNumber,
      outcome: verdict.outcome,
      status: result.kind === 'response' ? result.status : undefined,
      error: result.kind === 'error' ? result.error : undefined,
      retryInMs: verdict.retryInMs,
      endpointDisabled,
      staleClaim: held ? undefined : true,
    },
    'webhook attempt',
  );
}

/** The host an attempt goes to, for its span (never the path or query: they may hold the integrator's tokens). */
function hostOf(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
}
