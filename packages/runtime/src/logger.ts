import pino, { type Logger } from 'pino';
import { trace } from '@opentelemetry/api';

export type { Logger } from 'pino';

/**
 * Personal data and secrets never reach the logs: these paths are censored wherever they appear in a
 * logged object (one or two levels deep, which is how services log requests and messages).
 */
const REDACT = [
  'authorization', 'apiKey', 'api_key', 'token', 'secret', 'password', 'email', 'phone', 'customerName',
  '*.authorization', '*.apiKey', '*.api_key', '*.token', '*.secret', '*.password', '*.email', '*.phone', '*.customerName',
  'recipient.name', '*.recipient.name', 'contact.name', '*.contact.name',
  'req.headers.authorization', 'req.headers.cookie', 'headers.authorization',
];

export interface LoggerOptions {
  service: string;
  level?: string;
  /** Where lines go; defaults to stdout. Tests pass a stream to read them back. */
  destination?: pino.DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      name: options.service,
      level: options.level ?? 'info',
      base: { service: options.service },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // Every line logged inside a span carries its trace id, so logs join traces.
      mixin() {
        const ctx = trace.getActiveSpan()?.spanContext();
        return ctx && ctx.traceId !== '00000000000000000000000000000000' ? { traceId: ctx.traceId, spanId: ctx.spanId } : {};
      },
    },
    options.destination,
  );
}

/** Fields of a line logged through `collapseRepeats`; `err` decides the cause. */
export type LogFields = Record<string, unknown> & { err?: unknown };

export interface CollapseOptions {
  /** Length of one interval: at most one line per cause per interval while it repeats (default 10 000 ms). */
  intervalMs?: number;
}

/** A logger for failures that can repeat in a loop (a consumer, a due-work loop): see `collapseRepeats`. */
export interface CollapsedLogger {
  warn(fields: LogFields, msg: string): void;
  error(fields: LogFields, msg: string): void;
  /** Writes the counts not written yet and forgets every cause; call it when the loop stops. */
  flush(): void;
}

export const DEFAULT_COLLAPSE_INTERVAL_MS = 10_000;

/**
 * What makes two failures "the same cause": the error's class and code (pg `57P01`, `ECONNREFUSED`, …),
 * or without a code its message with numbers masked (ports, counts and ids written as digits vary), plus
 * the cause it wraps, one level down.
 */
export function causeOf(err: unknown, depth = 0): string {
  if (err === undefined || err === null) return '';
  if (!(err instanceof Error)) return String(err).replace(/\d+/g, '#').slice(0, 200);
  const code = (err as { code?: unknown }).code;
  const own = typeof code === 'string' || typeof code === 'number' ? `${err.name} ${code}` : `${err.name}: ${err.message.replace(/\d+/g, '#')}`.slice(0, 200);
  const inner = depth === 0 && err.cause !== undefined ? causeOf(err.cause, 1) : '';
  return inner ? `${own} <- ${inner}` : own;
}

interface Repeating {
  level: 'warn' | 'error';
  msg: string;
  cause: string;
  /** Occurrences since the last line written for this cause. */
  repeats: number;
  since: number;
  timer: NodeJS.Timeout;
}

/**
 * Collapses repeated lines, so an outage does not bury the logs: per (level, message, cause) the first
 * occurrence is written as it comes (fields, error and stack); repeats are only counted, and when the
 * interval ends one line with the message, the cause and `repeated: <count>` is written. A cause that
 * keeps repeating thus writes one line per interval; one that stays quiet for a whole interval is
 * forgotten, and its next occurrence is written in full again.
 */
export function collapseRepeats(logger: Logger, options: CollapseOptions = {}): CollapsedLogger {
  const intervalMs = options.intervalMs ?? DEFAULT_COLLAPSE_INTERVAL_MS;
  const repeating = new Map<string, Repeating>();

  const summarize = (entry: Repeating): void => {
    logger[entry.level]({ cause: entry.cause, repeated: entry.repeats, overMs: Date.now() - entry.since }, entry.msg);
  };
  const schedule = (key: string): NodeJS.Timeout => {
    const timer = setTimeout(() => {
      const entry = repeating.get(key);
      if (!entry) return;
      if (entry.repeats === 0) {
        repeating.delete(key);
        return;
      }
      summarize(entry);
      entry.repeats = 0;
      entry.since = Date.now();
      entry.timer = schedule(key);
    }, intervalMs);
    timer.unref();
    return timer;
  };
  const write = (level: 'warn' | 'error', fields: LogFields, msg: string): void => {
    const cause = causeOf(fields.err);
    const key = `${level}\u0000${msg}\u0000${cause}`;
    const entry = repeating.get(key);
    if (entry) {
      entry.repeats++;
      return;
    }
    logger[level](fields, msg);
    repeating.set(key, { level, msg, cause, repeats: 0, since: Date.now(), timer: schedule(key) });
  };
  return {
    warn: (fields, msg) => write('warn', fields, msg),
    error: (fields, msg) => write('error', fields, msg),
    flush() {
      for (const entry of repeating.values()) {
        clearTimeout(entry.timer);
        if (entry.repeats > 0) summarize(entry);
      }
      repeating.clear();
    },
  };
}
