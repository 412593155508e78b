import { context, propagation, trace, SpanStatusCode, type Context, type Span, SpanKind } from '@opentelemetry/api';

export { SpanKind } from '@opentelemetry/api';

/**
 * Spans go through @opentelemetry/api only. With no SDK registered they cost almost nothing; an SDK
 * started by the process (when OTEL_EXPORTER_OTLP_ENDPOINT is set) makes them real.
 */
export const tracer = trace.getTracer('review-request-service');

export async function withSpan<T>(name: string, attributes: Record<string, string | number | boolean>, fn: (span: Span) => Promise<T>, options: { kind?: SpanKind; parent?: Context } = {}): Promise<T> {
  return tracer.startActiveSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes }, options.parent ?? context.active(), async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  });
}

/** Writes the active trace context into a carrier (NATS headers, gRPC metadata as a record). */
export function injectTraceContext(carrier: Record<string, string>, ctx: Context = context.active()): Record<string, string> {
  propagation.inject(ctx, carrier);
  return carrier;
}

export function extractTraceContext(carrier: Readonly<Record<string, string>>): Context {
  return propagation.extract(context.active(), carrier);
}

export function currentTraceId(): string | undefined {
  const id = trace.getActiveSpan()?.spanContext().traceId;
  return id && id !== '00000000000000000000000000000000' ? id : undefined;
}
