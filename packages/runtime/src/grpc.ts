import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { context } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { DomainError, isErrorKind, UnavailableError, type ErrorKind } from './errors';
import { isDatabaseUnavailable } from './db';
import type { Health } from './health';
import { histogram, LATENCY_BUCKETS } from './metrics';
import { extractTraceContext, injectTraceContext, withSpan, SpanKind } from './tracing';
import { GRPC_MAX_REQUEST_BYTES, inProcessCall, serveInProcess } from './grpcInProcess';

/*
 * Domain errors cross gRPC intact: the server maps the kind to a gRPC status and puts kind, code and
 * details into trailing metadata; the client turns them back into the same error. Anything else becomes `internal` (server side) or
 * `service_unavailable` (transport failures, client side).
 */
const MD_KIND = 'rrs-error-kind';
const MD_CODE = 'rrs-error-code';
const MD_DETAILS = 'rrs-error-details-bin';

export const GRPC_STATUS_OF_KIND: Record<ErrorKind, grpc.status> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  unauthenticated: grpc.status.UNAUTHENTICATED,
  forbidden: grpc.status.PERMISSION_DENIED,
  not_found: grpc.status.NOT_FOUND,
  conflict: grpc.status.ABORTED,
  payment_required: grpc.status.FAILED_PRECONDITION,
  rate_limited: grpc.status.RESOURCE_EXHAUSTED,
  unavailable: grpc.status.UNAVAILABLE,
  internal: grpc.status.INTERNAL,
};

const grpcDuration = histogram({
  name: 'grpc_server_handling_seconds',
  help: 'Duration of gRPC calls handled, by service, method and gRPC status code.',
  labelNames: ['service', 'method', 'code'],
  buckets: LATENCY_BUCKETS,
});

function toServiceError(thrown: unknown, logger: Logger, method: string): Partial<grpc.ServiceError> {
  const metadata = new grpc.Metadata();
  // A database that cannot be reached is an outage, not a fault: callers may retry (and the review form
  // falls back to the bus), so it crosses as `unavailable` rather than `internal`.
  const err = !(thrown instanceof DomainError) && isDatabaseUnavailable(thrown) ? new UnavailableError('the service cannot reach its database, retry later', { cause: thrown }) : thrown;
  if (err instanceof DomainError && err.kind !== 'internal') {
    metadata.set(MD_KIND, err.kind);
    metadata.set(MD_CODE, err.code);
    if (err.details) metadata.set(MD_DETAILS, Buffer.from(JSON.stringify(err.details)));
    return { code: GRPC_STATUS_OF_KIND[err.kind], details: err.message, metadata };
  }
  logger.error({ err, method }, 'gRPC handler failed');
  metadata.set(MD_KIND, 'internal');
  metadata.set(MD_CODE, 'internal');
  return { code: grpc.status.INTERNAL, details: 'internal error', metadata };
}

export function fromServiceError(err: grpc.ServiceError): DomainError {
  const code = err.metadata?.get(MD_CODE)[0];
  const kind = err.metadata?.get(MD_KIND)[0];
  if (typeof code === 'string' && isErrorKind(kind)) {
    const raw = err.metadata.get(MD_DETAILS)[0];
    const details = raw ? (JSON.parse(Buffer.from(raw as Buffer).toString('utf8')) as Record<string, unknown>) : undefined;
    if (kind === 'internal') return new DomainError('internal', 'internal', `backing service error: ${err.details || err.message}`, { cause: err });
    return new DomainError(kind, code, err.details, { cause: err, details });
  }
  if (err.code === grpc.status.DEADLINE_EXCEEDED || err.code === grpc.status.UNAVAILABLE) {
    return new UnavailableError(undefined, { cause: err });
  }
  return new DomainError('internal', 'internal', `backing service error: ${err.details || err.message}`, { cause: err });
}

function metadataRecord(md: grpc.Metadata): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(md.getMap())) if (typeof v === 'string') out[k] = v;
  return out;
}

/** Async implementation of a unary-only gRPC service: each method takes the request and returns the response. */
export type AsyncUnaryService<S extends grpc.UntypedServiceImplementation> = {
  // The index signature grpc-js puts on every server interface is dropped: only named methods remain.
  [K in keyof S as string extends K ? never : K]: S[K] extends grpc.handleUnaryCall<infer Req, infer Res> ? (request: Req, metadata: grpc.Metadata) => Promise<Res> : never;
};

export function unaryService<S extends grpc.UntypedServiceImplementation>(
  serviceName: string,
  definition: grpc.ServiceDefinition,
  impl: AsyncUnaryService<S>,
  logger: Logger,
): grpc.UntypedServiceImplementation {
  const out: grpc.UntypedServiceImplementation = {};
  for (const key of Object.keys(definition)) {
    const fn = (impl as Record<string, (req: unknown, md: grpc.Metadata) => Promise<unknown>>)[key];
    if (typeof fn !== 'function') throw new Error(`${serviceName}.${key} is not implemented`);
    // The RPC's own name (`Authenticate`), as in the .proto, not the generated camelCase key.
    const method = definition[key].path.split('/').pop() ?? key;
    out[key] = ((call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const started = process.hrtime.bigint();
      const parent = extractTraceContext(metadataRecord(call.metadata));
      withSpan(`${serviceName}/${method}`, { 'rpc.system': 'grpc', 'rpc.service': serviceName, 'rpc.method': method },
        () => fn.call(impl, call.request, call.metadata), { kind: SpanKind.SERVER, parent })
        .then(
          (res) => {
            grpcDuration.observe({ service: serviceName, method, code: 'OK' }, Number(process.hrtime.bigint() - started) / 1e9);
            callback(null, res);
          },
          (err: unknown) => {
            const se = toServiceError(err, logger, `${serviceName}/${method}`);
            grpcDuration.observe({ service: serviceName, method, code: grpc.status[se.code ?? 2] }, Number(process.hrtime.bigint() - started) / 1e9);
            callback(se as grpc.ServiceError, null);
          },
        );
    }) as grpc.handleUnaryCall<unknown, unknown>;
  }
  return out;
}

export interface GrpcServerOptions {
  host: string;
  port: number;
  services: Array<{ name: string; definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation }>;
  health: Health;
  logger: Logger;
}

export interface RunningGrpcServer {
  port: number;
  /** Refuses new calls, waits for those in flight (up to graceMs), then closes. */
  stop(graceMs?: number): Promise<void>;
}

/** Starts a gRPC server that also answers the standard health service (grpc.health.v1.Health). */
export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningGrpcServer> {
  const server = new grpc.Server({
    'grpc.max_receive_message_length': GRPC_MAX_REQUEST_BYTES,
    // Clients reconnect (and so re-resolve a `dns:///` target) at least once a minute, so a replica added
    // by a scale-up or a rollout gets its share of calls; calls in flight get 10 s to finish on the old one.
    'grpc.max_connection_age_ms': 60_000,
    'grpc.max_connection_age_grace_ms': 10_000,
  });
  const statusMap: Record<string, 'SERVING' | 'NOT_SERVING'> = { '': 'NOT_SERVING' };
  for (const s of options.services) statusMap[s.name] = 'NOT_SERVING';
  const healthImpl = new HealthImplementation(statusMap);
  healthImpl.addToServer(server);
  const setAll = (serving: boolean) => {
    for (const name of Object.keys(statusMap)) healthImpl.setStatus(name, serving ? 'SERVING' : 'NOT_SERVING');
  };
  options.health.onChange(setAll);
  setAll(options.health.isReady);
  for (const s of options.services) server.addService(s.definition, s.implementation);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${options.host}:${options.port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  const leaveProcess = serveInProcess(`${options.host}:${port}`, options.services);
  return {
    port,
    stop: (graceMs = 10_000) =>
      new Promise<void>((resolve) => {
        leaveProcess();
        setAll(false);
        const force = setTimeout(() => server.forceShutdown(), graceMs);
        force.unref();
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}

type PromiseMethod<F> = F extends (
  request: infer Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  callback: (error: grpc.ServiceError | null, response: infer Res) => void,
) => grpc.ClientUnaryCall
  ? (request: Req, options?: { deadlineMs?: number; metadata?: Record<string, string> }) => Promise<Res>
  : never;

/** The promise form of a ts-proto grpc-js client: each unary method takes the request and resolves the response. */
export type PromiseClient<C> = {
  [K in keyof C as [PromiseMethod<C[K]>] extends [never] ? never : K]: PromiseMethod<C[K]>;
};

type GrpcClientCtor<C> = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ClientOptions) => C;

export interface GrpcClientHandle<C> {
  client: PromiseClient<C>;
  close(): void;
}

const ROUND_ROBIN_SERVICE_CONFIG = JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] });

/** Creates a client whose calls carry the trace context and a deadline, and reject with the domain error the server threw. */
export function createGrpcClient<C extends grpc.Client>(Ctor: GrpcClientCtor<C>, address: string, defaults: { deadlineMs?: number } = {}): GrpcClientHandle<C> {
  const raw = new Ctor(address, grpc.credentials.createInsecure(), {
    // Round robin over every address the target resolves to: a `dns:///` name of a headless Service
    // resolves to each replica, so calls spread over all of them rather than riding one long-lived HTTP/2
    // connection to one pod. A name that resolves to one address (a ClusterIP Service) behaves as before.
    'grpc.service_config': ROUND_ROBIN_SERVICE_CONFIG,
    'grpc.keepalive_time_ms': 30_000,
    'grpc.enable_retries': 1,
    // A callee that was down is tried again within 5 s once it is back (grpc-js backs off up to 120 s by
    // default, which kept callers answering 503 for minutes after a short outage).
    'grpc.initial_reconnect_backoff_ms': 500,
    'grpc.max_reconnect_backoff_ms': 5_000,
  });
  const definition = (Ctor as unknown as { service?: grpc.ServiceDefinition }).service;
  const client = new Proxy({} as PromiseClient<C>, {
    get(_t, prop: string) {
      const method = (raw as unknown as Record<string, unknown>)[prop];
      if (typeof method !== 'function') return undefined;
      const path = definition?.[prop]?.path;
      return (request: unknown, opts: { deadlineMs?: number; metadata?: Record<string, string> } = {}) =>
        new Promise((resolve, reject) => {
          const md = new grpc.Metadata();
          for (const [k, v] of Object.entries(injectTraceContext({ ...(opts.metadata ?? {}) }, context.active()))) md.set(k, v);
          const deadline = new Date(Date.now() + (opts.deadlineMs ?? defaults.deadlineMs ?? 5_000));
          const answer = (err: grpc.ServiceError | null, res: unknown) => (err ? reject(fromServiceError(err)) : resolve(res));
          const direct = path === undefined ? undefined : inProcessCall(address, path);
          if (direct) direct(request, md, deadline, answer);
          else (method as (...args: unknown[]) => unknown).call(raw, request, md, { deadline }, answer);
        });
    },
  });
  return { client, close: () => raw.close() };
}
