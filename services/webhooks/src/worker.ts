import { counter, extractTraceContext, histogram, LATENCY_BUCKETS, SpanKind, withSpan, type Logger, type Pool, type PoolClient } from '@rrs/runtime';
import { SpanStatusCode, type Span } from '@opentelemetry/api';
import { claimDue, DUE_CHANNEL, judgeAttempt, recordAttempt, type ClaimedDelivery, type DeliveryPolicy } from './deliveries';
import { postWebhook } from './sender';
import { signatureHeader } from './signing';
import type { UrlGuard } from './urlGuard';

const attemptsTotal = counter({ name: 'webhook_attempts_total', help: 'Webhook delivery attempts, by outcome.', labelNames: ['outcome'] });
const attemptSeconds = histogram({ name: 'webhook_attempt_duration_seconds', help: 'Duration of webhook delivery attempts.', labelNames: ['outcome'], buckets: [...LATENCY_BUCKETS, 15, 30] });
const endpointsDisabled = counter({ name: 'webhook_endpoints_disabled_total', help: 'Endpoints disabled by delivery failures, by reason.', labelNames: ['reason'] });

export interface WorkerOptions {
  pool: Pool;
  guard: UrlGuard;
  policy: DeliveryPolicy;
  logger: Logger;
  /** Attempts in flight at once in this process. */
  concurrency: number;
  /** See WebhookRequest.ca. */
  trustedCa?: string[];
  /**
   * Longest sleep with nothing due. New deliveries wake the worker at once (notify() in this process,
   * a Postgres NOTIFY from any replica); this bound only matters while the listening connection is down.
   */
  maxIdleMs?: number;
}

/**
 * Sends due deliveries. It sleeps until the earliest pending delivery is due (read from Postgres) or
 * until woken — by notify() or by a NOTIFY on DUE_CHANNEL from any replica — never a fixed slow poll,
 * and claims with SKIP LOCKED, so replicas share the work.
 */
export class DeliveryWorker {
  private readonly inflight = new Set<Promise<void>>();
  private stopped = false;
  private wake: (() => void) | null = null;
  private woken = false;
  private loop: Promise<void> | null = null;
  private listener: PoolClient | null = null;

  constructor(private readonly options: WorkerOptions) {}

  start(): void {
    this.loop ??= this.run();
    void this.listen();
  }

  /** Holds one connection LISTENing on DUE_CHANNEL; reconnects after a second when it drops. */
  private async listen(): Promise<void> {
    if (this.stopped) return;
    let client: PoolClient | null = null;
    try {
      client = await this.options.pool.connect();
      const held = client;
      held.on('notification', () => this.notify());
      held.once('error', (err) => {
        this.options.logger.warn({ err }, 'webhook worker lost its LISTEN connection; reconnecting');
        if (this.listener === held) this.listener = null;
        held.release(err);
        setTimeout(() => void this.listen(), 1_000).unref();
      });
      await held.query(`LISTEN ${DUE_CHANNEL}`);
      if (this.stopped) {
        held.release();
        return;
      }
      this.listener = held;
      // A delivery may have been queued by another replica while this connection was not listening.
      this.notify();
    } catch (err) {
      client?.release(err as Error);
      if (this.stopped) return;
      this.options.logger.warn({ err }, 'webhook worker could not LISTEN; retrying');
      setTimeout(() => void this.listen(), 1_000).unref();
    }
  }

  /** Something may be due now (a new delivery, a replay, a finished attempt). */
  notify(): void {
    this.woken = true;
    this.wake?.();
  }

  /** Stops claiming and waits for attempts in flight (each bounded by the send timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.notify();
    const listener = this.listener;
    this.listener = null;
    listener?.release(true);
    await this.loop;
    await Promise.allSettled([...this.inflight]);
  }

  private get leaseMs(): number {
    return this.options.policy.timeoutMs + this.options.policy.claimLeaseMarginMs;
  }

  private async run(): Promise<void> {
    const { pool, logger, concurrency } = this.options;
    const maxIdleMs = this.options.maxIdleMs ?? 30_000;
    while (!this.stopped) {
      this.woken = false;
      let sleepMs = maxIdleMs;
      try {
        const free = concurrency - this.inflight.size;
        if (free > 0) {
          const claimed = await claimDue(pool, free, this.leaseMs);
          for (const c of claimed) this.launch(c);
          if (claimed.length === free) continue;
        }
        if (this.inflight.size < concurrency) {
          const { rows } = await pool.query<{ ms: number | null }>(
            // Time to the earliest due delivery, by the database clock (the one next_attempt_at was set by); NULL when none.
            `SELECT (EXTRACT(EPOCH FROM min(next_attempt_at) - now()) * 1000)::float8 AS ms FROM deliveries WHERE status = 'pending'`,
          );
          if (rows[0].ms !== null) sleepMs = Math.min(maxIdleMs, Math.max(0, Math.ceil(rows[0].ms)));
        }
      } catch (err) {
        if (this.stopped) break;
        logger.error({ err }, 'webhook worker could not claim deliveries; retrying');
        sleepMs = 1_000;
      }
      if (this.stopped || this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, sleepMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  private launch(claim: ClaimedDelivery): void {
    const p = this.attempt(claim)
      .catch((err: unknown) => {
        // The claim's lease runs out and the delivery is attempted again: nothing is lost.
        this.options.logger.error({ err, deliveryId: claim.id }, 'webhook attempt could not be recorded');
      })
      .finally(() => {
        this.inflight.delete(p);
        this.notify();
      });
    this.inflight.add(p);
  }

  /**
   * One attempt, in a CLIENT span whose parent is the context the delivery was queued in (the event's
   * trace), whichever worker makes it and however late. The span is ours only: the request to the
   * receiver carries no trace headers.
   */
  private attempt(claim: ClaimedDelivery): Promise<void> {
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
      (span) => this.attemptIn(span, claim),
      { kind: SpanKind.CLIENT, parent: extractTraceContext(claim.traceContext) },
    );
  }

  private async attemptIn(span: Span, claim: ClaimedDelivery): Promise<void> {
    const { guard, policy, pool, logger } = this.options;
    const started = new Date();
    const timestamp = Math.floor(started.getTime() / 1000);
    const result = await postWebhook(guard, {
      url: claim.url,
      body: claim.body,
      timeoutMs: policy.timeoutMs,
      ca: this.options.trustedCa,
      headers: {
        // The event id: the same on every attempt, so receivers can drop repeats.
        'webhook-id': claim.eventId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signatureHeader(claim.secrets, claim.eventId, timestamp, claim.body),
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
}

/** The host an attempt goes to, for its span (never the path or query: they may hold the integrator's tokens). */
function hostOf(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
}
