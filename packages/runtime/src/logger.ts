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
