import http from 'node:http';
import https from 'node:https';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider, type SpanProcessor } from '@opentelemetry/sdk-trace-node';
import type { Env } from './config';

/**
 * The OpenTelemetry trace SDK of a process. It starts only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set
 * (or a test hands in its own span processors): without it the spans made through @opentelemetry/api
 * stay no-ops and nothing is exported.
 *
 * What it registers, once per process (the all-in-one runs every service in one process, so the first
 * service to start wins and the others share it):
 * - a tracer provider exporting OTLP over HTTP (the exporter reads the standard `OTEL_EXPORTER_OTLP_*`
 *   variables: endpoint, headers, timeout; the sampler follows `OTEL_TRACES_SAMPLER`/`_ARG`);
 * - the AsyncLocalStorage context manager, so the active span follows async code;
 * - the W3C trace-context (and baggage) propagator, which `injectTraceContext`/`extractTraceContext`
 *   use to carry the context in gRPC metadata and NATS headers;
 * - a SERVER span for each incoming HTTP request (the gateway's API and form, the SMS receipts) that
 *   continues a caller's `traceparent`, so the gRPC calls made while handling it join its trace. Ops
 *   endpoints are left out. Outgoing HTTP is not instrumented: providers and integrators' webhook
 *   endpoints get no trace headers from us.
 */
export interface Tracing {
  /** Exports the spans still buffered, then stops. */
  shutdown(): Promise<void>;
}

export interface StartTracingOptions {
  /** `service.name` unless OTEL_SERVICE_NAME says otherwise. */
  serviceName: string;
  env?: Env;
  /** Replaces the OTLP exporter (tests: an in-memory exporter behind a SimpleSpanProcessor). */
  spanProcessors?: SpanProcessor[];
}

let started: Tracing | null = null;

const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

export function tracingEnabled(env: Env = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** Starts the trace SDK when configured; null when tracing is off. Idempotent within a process. */
export function startTracing(options: StartTracingOptions): Tracing | null {
  if (started) return started;
  const env = options.env ?? process.env;
  if (!options.spanProcessors && !tracingEnabled(env)) return null;
  // OTEL_RESOURCE_ATTRIBUTES (deployment.environment, k8s.pod.name, …) merged over the service name.
  const resource = resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || options.serviceName }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: options.spanProcessors ?? [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  provider.register({
    propagator: new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  });
  const disableHttp = traceIncomingHttp();
  // The API's tracers keep delegating to the first registered provider, so a process registers one
  // and never swaps it: shutdown flushes and ends it, and a later startTracing returns the same one.
  let stopped: Promise<void> | null = null;
  const tracing: Tracing = {
    shutdown() {
      if (!stopped) {
        disableHttp();
        stopped = provider.shutdown();
      }
      return stopped;
    },
  };
  started = tracing;
  return tracing;
}

type Emit = (this: http.Server, event: string | symbol, ...args: unknown[]) => boolean;

/**
 * Wraps the `request` event of every HTTP(S) server of the process (servers made before too: the patch
 * is on the prototypes) in a SERVER span whose parent is the request's `traceparent`. The handler runs
 * with that span active; the span ends when the response is finished or the connection closes.
 */
function traceIncomingHttp(): () => void {
  const tracer = trace.getTracer('review-request-service/http');
  const prototypes = [http.Server.prototype, https.Server.prototype] as unknown as Array<{ emit: Emit }>;
  const originals = prototypes.map((p) => p.emit);
  prototypes.forEach((proto, i) => {
    const original = originals[i];
    proto.emit = function emit(this: http.Server, event: string | symbol, ...args: unknown[]): boolean {
      if (event !== 'request') return original.call(this, event, ...args);
      const req = args[0] as http.IncomingMessage;
      const res = args[1] as http.ServerResponse;
      const path = (req.url ?? '/').split('?')[0];
      if (OPS_PATHS.has(path)) return original.call(this, event, ...args);
      const carrier: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') carrier[k] = v;
      const parent = propagation.extract(context.active(), carrier);
      const span = tracer.startSpan(
        `${req.method ?? 'HTTP'}`,
        { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method ?? '', 'url.path': path } },
        parent,
      );
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        span.setAttribute('http.response.status_code', res.statusCode);
        // The route template, when the app names it (the gateway sets res.locals.route).
        const route = (res as unknown as { locals?: { route?: unknown } }).locals?.route;
        if (typeof route === 'string') {
          span.setAttribute('http.route', route);
          span.updateName(`${req.method ?? 'HTTP'} ${route}`);
        }
        if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      };
      res.once('finish', end);
      res.once('close', end);
      return context.with(trace.setSpan(parent, span), () => original.call(this, event, ...args));
    } as Emit;
  });
  return () => prototypes.forEach((proto, i) => (proto.emit = originals[i]));
}
