import * as grpc from '@grpc/grpc-js';

/*
 * Calls between services that share one process (the all-in-one) skip HTTP/2 and the loopback socket:
 * the client hands the request to the server's handler directly. Everything else a call goes through
 * stays: the request and the response are encoded and decoded with the method's own serializers (the
 * handler sees exactly what the wire would have given it, and a message too large is refused as grpc-js
 * refuses it), the metadata carries the trace context, the handler is the one `unaryService` built (its
 * span, duration metric and error mapping), the error crosses as a ServiceError with the same trailing
 * metadata, and the caller's deadline is kept. Off unless the process turns it on, so services started
 * side by side in one test process still talk real gRPC; a server that stops is removed first, and its
 * callers then reach its (closed) port as they would in the distributed shape.
 */

let enabled = false;
/** Address (`host:port`, as the server was bound and as clients dial it) → method path → method. */
const served = new Map<string, Map<string, grpc.MethodDefinition<unknown, unknown> & { handler: grpc.handleUnaryCall<unknown, unknown> }>>();

/** The largest request a server of ours accepts (`startGrpcServer`) and the largest answer a client accepts (grpc-js's default). */
export const GRPC_MAX_REQUEST_BYTES = 16 * 1024 * 1024;
const GRPC_MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/** Turns in-process calls on for this process: servers started afterwards are reachable directly. */
export function callServicesInProcess(): void {
  enabled = true;
}

/** Makes a server's unary handlers reachable in-process under its address; returns the function that removes them. */
export function serveInProcess(address: string, services: ReadonlyArray<{ definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation }>): () => void {
  if (!enabled) return () => undefined;
  const methods = new Map<string, grpc.MethodDefinition<unknown, unknown> & { handler: grpc.handleUnaryCall<unknown, unknown> }>();
  for (const service of services) {
    for (const [key, method] of Object.entries(service.definition)) {
      if (method.requestStream || method.responseStream) continue;
      methods.set(method.path, { ...method, handler: service.implementation[key] as grpc.handleUnaryCall<unknown, unknown> });
    }
  }
  served.set(address, methods);
  return () => {
    if (served.get(address) === methods) served.delete(address);
  };
}

function statusError(code: grpc.status, details: string, metadata = new grpc.Metadata()): grpc.ServiceError {
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), { code, details, metadata });
}

/**
 * The in-process form of one unary call to `address`, when a server of this process serves `path` there;
 * otherwise undefined and the caller goes over the network.
 */
export function inProcessCall(address: string, path: string): ((request: unknown, metadata: grpc.Metadata, deadline: Date, callback: (err: grpc.ServiceError | null, response: unknown) => void) => void) | undefined {
  const method = served.get(address)?.get(path);
  if (!method) return undefined;
  return (request, metadata, deadline, callback) => {
    let answered = false;
    const answer = (err: grpc.ServiceError | null, response: unknown) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      callback(err, response);
    };
    const timer = setTimeout(() => answer(statusError(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded'), null), Math.max(0, deadline.getTime() - Date.now()));
    let decoded: unknown;
    try {
      const bytes = method.requestSerialize(request);
      if (bytes.length > GRPC_MAX_REQUEST_BYTES) return answer(statusError(grpc.status.RESOURCE_EXHAUSTED, `Received message larger than max (${bytes.length} vs. ${GRPC_MAX_REQUEST_BYTES})`), null);
      decoded = method.requestDeserialize(bytes);
    } catch (err) {
      return answer(statusError(grpc.status.INTERNAL, `Request message serialization failure: ${(err as Error).message}`), null);
    }
    const call = { request: decoded, metadata: metadata.clone() } as grpc.ServerUnaryCall<unknown, unknown>;
    method.handler(call, (err, response) => {
      if (err) {
        const status = err as Partial<grpc.ServiceError>;
        return answer(statusError(status.code ?? grpc.status.UNKNOWN, status.details ?? status.message ?? '', status.metadata ?? new grpc.Metadata()), null);
      }
      try {
        const bytes = method.responseSerialize(response);
        if (bytes.length > GRPC_MAX_RESPONSE_BYTES) return answer(statusError(grpc.status.RESOURCE_EXHAUSTED, `Received message larger than max (${bytes.length} vs. ${GRPC_MAX_RESPONSE_BYTES})`), null);
        answer(null, method.responseDeserialize(bytes));
      } catch (thrown) {
        answer(statusError(grpc.status.INTERNAL, `Response message parsing error: ${(thrown as Error).message}`), null);
      }
    });
  };
}
