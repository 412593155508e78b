import * as grpc from '@grpc/grpc-js';
import { webhooksV1 } from '@rrs/proto';
import {
  ConflictError, createGrpcClient, DomainError, Health, InvalidError, NotFoundError, PaymentRequiredError, startGrpcServer,
  unaryService, UnavailableError, GRPC_STATUS_OF_KIND, createPool, isDatabaseUnavailable, type RunningGrpcServer,
} from '@rrs/runtime';
import { freePort, testLogger } from '@rrs/testkit';

/** A domain error thrown by a gRPC handler reaches the client as the same kind, code, message and details. */
describe('domain errors across gRPC', () => {
  let server: RunningGrpcServer;
  let handle: ReturnType<typeof createGrpcClient<webhooksV1.WebhooksServiceClient>>;
  let next: () => unknown;
  let observedStatus: grpc.status | undefined;

  beforeAll(async () => {
    const logger = testLogger();
    const health = new Health();
    health.setReady(true);
    const impl = new Proxy({}, { get: () => async () => { throw next(); } });
    server = await startGrpcServer({
      host: '127.0.0.1', port: 0, health, logger,
      services: [{ name: 'rrs.webhooks.v1.WebhooksService', definition: webhooksV1.WebhooksServiceService, implementation: unaryService('rrs.webhooks.v1.WebhooksService', webhooksV1.WebhooksServiceService, impl as never, logger) }],
    });
    handle = createGrpcClient(webhooksV1.WebhooksServiceClient, `127.0.0.1:${server.port}`);
  });
  afterAll(async () => {
    handle.close();
    await server.stop(100);
  });

  async function thrown(err: unknown): Promise<DomainError> {
    next = () => err;
    const raw = new webhooksV1.WebhooksServiceClient(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    observedStatus = await new Promise<grpc.status>((resolve) => raw.getEndpoint({ organizationId: 'o', id: 'x' }, (e) => resolve(e!.code)));
    raw.close();
    return handle.client.getEndpoint({ organizationId: 'o', id: 'x' }).then(() => { throw new Error('resolved'); }, (e: DomainError) => e);
  }

  it.each([
    ['NotFoundError', new NotFoundError('endpoint'), 'not_found', 'not_found', grpc.status.NOT_FOUND],
    ['ConflictError', new ConflictError('webhook_endpoint_limit', 'too many'), 'conflict', 'webhook_endpoint_limit', grpc.status.ABORTED],
    ['PaymentRequiredError', new PaymentRequiredError('plan_required', 'upgrade'), 'payment_required', 'plan_required', grpc.status.FAILED_PRECONDITION],
    ['UnavailableError', new UnavailableError('down for now'), 'unavailable', 'service_unavailable', grpc.status.UNAVAILABLE],
  ])('%s keeps its kind and code, with the gRPC status of its kind', async (_name, err, kind, code, status) => {
    const got = await thrown(err);
    expect(got).toBeInstanceOf(DomainError);
    expect([got.kind, got.code, got.message]).toEqual([kind, code, (err as Error).message]);
    expect(observedStatus).toBe(status);
    expect(GRPC_STATUS_OF_KIND[got.kind]).toBe(status);
  });

  it('an invalid error carries its field list', async () => {
    const got = await thrown(InvalidError.field('/url', 'not an https URL'));
    expect(got.kind).toBe('invalid');
    expect(got.code).toBe('invalid_request');
    expect(got.details).toEqual({ errors: [{ pointer: '/url', detail: 'not an https URL' }] });
    expect(observedStatus).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('anything else is internal and says nothing of its cause', async () => {
    const got = await thrown(new Error('secret database detail'));
    expect(got.kind).toBe('internal');
    expect(got.message).not.toContain('secret');
    expect(observedStatus).toBe(grpc.status.INTERNAL);
  });

  it('a handler whose database cannot be reached answers unavailable (503 at the gateway), not internal', async () => {
    // A real refusal: a pool on a port where no PostgreSQL listens.
    const pool = createPool({ url: `postgres://postgres@127.0.0.1:${await freePort()}/postgres`, schema: 'public' });
    const refused = await pool.query('SELECT 1').then(() => null, (e: unknown) => e);
    await pool.end();
    expect(isDatabaseUnavailable(refused)).toBe(true);
    const got = await thrown(refused);
    expect([got.kind, got.code]).toEqual(['unavailable', 'service_unavailable']);
    expect(observedStatus).toBe(grpc.status.UNAVAILABLE);
  });

  it.each([
    ['a statement error', Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' }), false],
    ['a server shutting down', Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }), true],
    ['a connection cut', new Error('Connection terminated unexpectedly'), true],
    ['a connection class SQLSTATE', Object.assign(new Error('connection failure'), { code: '08006' }), true],
  ])('isDatabaseUnavailable: %s → %s', (_name, err, expected) => {
    expect(isDatabaseUnavailable(err)).toBe(expected);
  });

  it('a server that is gone is unavailable', async () => {
    const gone = createGrpcClient(webhooksV1.WebhooksServiceClient, '127.0.0.1:1', { deadlineMs: 500 });
    const got = await gone.client.getEndpoint({ organizationId: 'o', id: 'x' }).then(() => null, (e: DomainError) => e);
    gone.close();
    expect(got?.kind).toBe('unavailable');
    expect(got?.code).toBe('service_unavailable');
  });
});
