import * as grpc from '@grpc/grpc-js';
import { webhooksV1 } from '@rrs/proto';
import {
  callServicesInProcess, ConflictError, createGrpcClient, DomainError, Health, InvalidError, NotFoundError, startGrpcServer,
  unaryService, UnavailableError, type RunningGrpcServer,
} from '@rrs/runtime';
import { testLogger } from '@rrs/testkit';

/*
 * The all-in-one's services call each other in process. A call made that way must be indistinguishable
 * to both sides from one over HTTP/2: the same decoded request and metadata for the handler, the same
 * answer or domain error for the caller, the caller's deadline kept, and a stopped server unreachable.
 * The same handler is served twice: once before in-process calls are turned on (so over the network
 * only), once after; every case runs against both.
 */
describe('gRPC calls between services of one process', () => {
  const SERVICE = 'rrs.webhooks.v1.WebhooksService';
  const logger = testLogger();
  let networked: RunningGrpcServer;
  let inProcess: RunningGrpcServer;
  let next: (request: webhooksV1.GetEndpointRequest, metadata: grpc.Metadata) => Promise<webhooksV1.GetEndpointResponse>;
  const seen: Array<{ request: unknown; metadata: Record<string, unknown>; during: boolean }> = [];
  /** True only while a test's call is being made, before it returns its promise. */
  let calling = false;

  async function serve(): Promise<RunningGrpcServer> {
    const health = new Health();
    health.setReady(true);
    const impl = {
      getEndpoint: async (request: webhooksV1.GetEndpointRequest, metadata: grpc.Metadata) => {
        seen.push({ request, metadata: metadata.getMap(), during: calling });
        return next(request, metadata);
      },
    };
    const all = new Proxy(impl, { get: (target, key) => (target as Record<string | symbol, unknown>)[key] ?? (async () => { throw new Error('not used'); }) });
    return startGrpcServer({
      host: '127.0.0.1', port: 0, health, logger,
      services: [{ name: SERVICE, definition: webhooksV1.WebhooksServiceService, implementation: unaryService(SERVICE, webhooksV1.WebhooksServiceService, all as never, logger) }],
    });
  }

  beforeAll(async () => {
    networked = await serve();
    callServicesInProcess();
    inProcess = await serve();
  });
  afterAll(async () => {
    await networked.stop(100);
    await inProcess.stop(100);
  });

  const clients: Array<ReturnType<typeof createGrpcClient<webhooksV1.WebhooksServiceClient>>> = [];
  afterEach(() => clients.splice(0).forEach((c) => c.close()));
  function clientOf(server: RunningGrpcServer, deadlineMs?: number) {
    const handle = createGrpcClient(webhooksV1.WebhooksServiceClient, `127.0.0.1:${server.port}`, { deadlineMs });
    clients.push(handle);
    return handle;
  }
  const endpoint = (id: string): webhooksV1.Endpoint => ({
    id, organizationId: 'org_1', url: 'https://crm.example/hook', events: ['review.created', 'cascade.completed'], description: 'CRM ✓',
    disabled: false, disabledReason: '', disabledAt: undefined, failingSince: undefined, createdAt: new Date('2026-11-26T10:00:00.000Z'),
    updatedAt: undefined, previousSecretExpiresAt: undefined,
  });

  it('an answer arrives the same both ways, and in process the handler runs inside the call, not over the network', async () => {
    next = async (request) => ({ endpoint: endpoint(request.id) });
    const answers = [];
    for (const server of [networked, inProcess]) answers.push(await clientOf(server).client.getEndpoint({ organizationId: 'org_1', id: 'we_1' }));
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[0].endpoint?.events).toEqual(['review.created', 'cascade.completed']);
    expect(answers[0].endpoint?.createdAt).toEqual(new Date('2026-11-26T10:00:00.000Z'));

    // Over HTTP/2 the handler runs in a later turn of the event loop; in process it runs inside the call.
    const inCall: boolean[] = [];
    for (const server of [networked, inProcess]) {
      seen.length = 0;
      calling = true;
      const answered = clientOf(server).client.getEndpoint({ organizationId: 'org_1', id: 'we_2' });
      calling = false;
      await answered;
      inCall.push(seen.length === 1 && seen[0].during === true);
    }
    expect(inCall).toEqual([false, true]);
  });

  it('the handler gets the decoded request (not the caller\'s object) and the metadata, both ways', async () => {
    next = async (request) => ({ endpoint: endpoint(request.id) });
    seen.length = 0;
    for (const server of [networked, inProcess]) {
      const request = { organizationId: 'org_1', id: 'we_3', stray: 'not in the message' } as webhooksV1.GetEndpointRequest;
      await clientOf(server).client.getEndpoint(request, { metadata: { 'x-request-id': 'req-42' } });
      expect(seen.at(-1)?.request).not.toBe(request);
    }
    expect(seen).toHaveLength(2);
    expect(seen[1].request).toEqual(seen[0].request);
    expect(seen[1].request).toEqual({ organizationId: 'org_1', id: 'we_3' });
    for (const one of seen) expect(one.metadata['x-request-id']).toBe('req-42');
  });

  it.each([
    ['NotFoundError', () => new NotFoundError('endpoint')],
    ['ConflictError', () => new ConflictError('webhook_endpoint_limit', 'too many')],
    ['UnavailableError', () => new UnavailableError('down for now')],
    ['InvalidError with its fields', () => InvalidError.field('/url', 'not an https URL')],
    ['a plain Error (internal, its message kept back)', () => new Error('secret database detail')],
  ])('%s reaches the caller the same both ways', async (_name, make) => {
    next = async () => { throw make(); };
    const errors: DomainError[] = [];
    for (const server of [networked, inProcess]) {
      errors.push(await clientOf(server).client.getEndpoint({ organizationId: 'org_1', id: 'we_4' }).then(() => { throw new Error('resolved'); }, (e: DomainError) => e));
    }
    expect(errors[1]).toBeInstanceOf(DomainError);
    expect([errors[1].kind, errors[1].code, errors[1].message, errors[1].details]).toEqual([errors[0].kind, errors[0].code, errors[0].message, errors[0].details]);
    expect(errors[1].message).not.toContain('secret');
  });

  it('a handler slower than the deadline leaves the caller unavailable at the deadline, both ways', async () => {
    const handlersDone: Array<Promise<void>> = [];
    next = () => {
      const answer = new Promise<webhooksV1.GetEndpointResponse>((resolve) => setTimeout(() => resolve({ endpoint: endpoint('late') }), 1_500));
      handlersDone.push(answer.then(() => undefined));
      return answer;
    };
    const started = Date.now();
    const errors = await Promise.all([networked, inProcess].map((server) =>
      clientOf(server, 150).client.getEndpoint({ organizationId: 'org_1', id: 'we_5' }).then(() => null, (e: DomainError) => ({ error: e, after: Date.now() - started }))));
    for (const got of errors) {
      expect([got?.error.kind, got?.error.code]).toEqual(['unavailable', 'service_unavailable']);
      // At the deadline, not when the handler answers.
      expect(got?.after).toBeLessThan(1_200);
    }
    await Promise.all(handlersDone);
  });

  it('a server that has stopped is no longer reached in process: its callers find it unavailable', async () => {
    const stopping = await serve();
    next = async (request) => ({ endpoint: endpoint(request.id) });
    const handle = clientOf(stopping, 500);
    await expect(handle.client.getEndpoint({ organizationId: 'org_1', id: 'we_6' })).resolves.toBeDefined();
    await stopping.stop(100);
    seen.length = 0;
    const got = await handle.client.getEndpoint({ organizationId: 'org_1', id: 'we_7' }).then(() => null, (e: DomainError) => e);
    expect([got?.kind, got?.code]).toEqual(['unavailable', 'service_unavailable']);
    expect(seen).toHaveLength(0);
  });
});
