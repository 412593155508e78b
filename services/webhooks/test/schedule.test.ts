import { JITTER, MAX_RETRY_AFTER_MS, nextAttemptDelay, parseRetryAfter, PRODUCTION_RETRY_SCHEDULE_MS } from '../src/schedule';
import { judgeAttempt } from '../src/deliveries';
import { buildConfig } from '../src/config';

const SECOND = 1000;
const MIN = 60 * SECOND;
const HOUR = 60 * MIN;

describe('retry schedule', () => {
  it('is, in production: at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h', () => {
    expect(PRODUCTION_RETRY_SCHEDULE_MS).toEqual([0, 5 * SECOND, 5 * MIN, 30 * MIN, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR]);
    expect(buildConfig({ DATABASE_URL: 'postgres://x/y', WEBHOOK_SECRET_KEYS: Buffer.alloc(32, 3).toString('base64') }).policy).toEqual({ retryScheduleMs: PRODUCTION_RETRY_SCHEDULE_MS, timeoutMs: 15_000, disableAfterMs: 5 * 24 * HOUR, secretGraceMs: 24 * HOUR, logRetentionMs: 30 * 24 * HOUR, claimLeaseMs: 4_000 });
  });

  it('gives each delay with at most ±10 % jitter, then null after the last attempt', () => {
    PRODUCTION_RETRY_SCHEDULE_MS.forEach((base, attemptsMade) => {
      expect(nextAttemptDelay(PRODUCTION_RETRY_SCHEDULE_MS, attemptsMade, null, () => 0)).toBe(Math.round(base * (1 - JITTER)));
      expect(nextAttemptDelay(PRODUCTION_RETRY_SCHEDULE_MS, attemptsMade, null, () => 0.5)).toBe(base);
      expect(nextAttemptDelay(PRODUCTION_RETRY_SCHEDULE_MS, attemptsMade, null, () => 0.999999)).toBeLessThanOrEqual(Math.round(base * (1 + JITTER)));
    });
    expect(nextAttemptDelay(PRODUCTION_RETRY_SCHEDULE_MS, 8)).toBeNull();
  });

  it('waits at least Retry-After, clamped to 24 h, never less than the schedule', () => {
    expect(nextAttemptDelay(PRODUCTION_RETRY_SCHEDULE_MS, 1, 60 * SECOND, () => 0.5)).toBe(60 * SECOND);
    expect(nextAttemptDelay(PRODUCTION_RETRY_SCHEDULE_MS, 2, 1 * SECOND, () => 0.5)).toBe(5 * MIN);
    expect(nextAttemptDelay(PRODUCTION_RETRY_SCHEDULE_MS, 1, 1000 * HOUR, () => 0.5)).toBe(MAX_RETRY_AFTER_MS);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(parseRetryAfter('120')).toBe(120 * SECOND);
    expect(parseRetryAfter(new Date(1_000_000 + 30 * SECOND).toUTCString(), 1_000_000)).toBe(30 * SECOND);
    expect(parseRetryAfter('soon')).toBeNull();
    expect(parseRetryAfter(undefined)).toBeNull();
  });
});

describe('judging an attempt', () => {
  const policy = { retryScheduleMs: [0, 100, 200] };
  const response = (status: number, retryAfter?: string) => ({ kind: 'response' as const, status, body: '', retryAfter, durationMs: 1 });
  const half = () => 0.5;

  it.each([200, 201, 204, 299])('%i is delivered', (status) => {
    expect(judgeAttempt(response(status), policy, 1, half)).toEqual({ outcome: 'delivered', gone: false });
  });

  it('410 fails at once and marks the endpoint gone', () => {
    expect(judgeAttempt(response(410), policy, 1, half)).toEqual({ outcome: 'failed', gone: true });
  });

  it.each([301, 302, 307, 308, 400, 401, 404, 500, 503])('%i is retried on the schedule', (status) => {
    expect(judgeAttempt(response(status), policy, 1, half)).toEqual({ outcome: 'retry', retryInMs: 100, gone: false });
  });

  it('429 and 5xx honour Retry-After; other statuses do not', () => {
    expect(judgeAttempt(response(429, '7'), policy, 1, half).retryInMs).toBe(7000);
    expect(judgeAttempt(response(503, '7'), policy, 1, half).retryInMs).toBe(7000);
    expect(judgeAttempt(response(400, '7'), policy, 1, half).retryInMs).toBe(100);
  });

  it('timeouts and connection errors are retried; the last failure fails the delivery', () => {
    const timeout = { kind: 'error' as const, error: 'timeout after 15000 ms', durationMs: 15000 };
    expect(judgeAttempt(timeout, policy, 2, half)).toEqual({ outcome: 'retry', retryInMs: 200, gone: false });
    expect(judgeAttempt(timeout, policy, 3, half)).toEqual({ outcome: 'failed', gone: false });
  });
});

describe('webhooks config', () => {
  const base = { DATABASE_URL: 'postgres://x/y', WEBHOOK_SECRET_KEYS: Buffer.alloc(32, 3).toString('base64') };
  it('reads a test schedule and the dev loopback setting', () => {
    const config = buildConfig({ ...base, WEBHOOK_RETRY_SCHEDULE_MS: '0,50,100', WEBHOOK_ALLOW_LOOPBACK_HTTP: 'true', WEBHOOK_TIMEOUT_MS: '500' });
    expect(config.policy.retryScheduleMs).toEqual([0, 50, 100]);
    expect(config.policy.timeoutMs).toBe(500);
    expect(config.allowLoopbackHttp).toBe(true);
    expect(buildConfig(base).allowLoopbackHttp).toBe(false);
  });

  it('refuses loopback webhooks in production and a malformed schedule, naming the variable', () => {
    expect(() => buildConfig({ ...base, NODE_ENV: 'production', WEBHOOK_ALLOW_LOOPBACK_HTTP: 'true' })).toThrow(/WEBHOOK_ALLOW_LOOPBACK_HTTP/);
    expect(() => buildConfig({ ...base, WEBHOOK_RETRY_SCHEDULE_MS: '0,5s' })).toThrow(/WEBHOOK_RETRY_SCHEDULE_MS/);
  });
});
