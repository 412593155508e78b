import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { ConflictError, Health, NotFoundError, UnauthenticatedError } from '@rrs/runtime';
import { z } from 'zod';
import { testLogger } from '@rrs/testkit';
import { createApp } from '../src/app';
import { clientErrorHandler } from '../src/http/clientError';
import type { Authenticator, Principal } from '../src/http/auth';
import type { GatewayClients } from '../src/clients';
import { createRateLimiter, type RateLimitConfig, type RateLimiter } from '../src/rateLimit';
import { defineRoute, type HandlerContext, type Route, type RouteSource } from '../src/http/route';

export function principal(overrides: Partial<Principal['organization']> = {}, scopes: string[] = ['locations:read', 'contacts:write', 'cascades:write', 'cascades:read', 'review-requests:write']): Principal {
  return {
    organization: { id: 'org_1', name: 'Acme', plan: 'standard', emailConfirmed: true, locale: 'en', defaultRegion: 'RU', timeZone: 'Europe/Moscow', ...overrides },
    keyId: `key_${Math.random().toString(36).slice(2)}`,
    scopes,
  };
}

/** An authenticator over a fixed key → principal table (the directory is tested with the real one). */
export function tableAuthenticator(table: Record<string, Principal>): Authenticator & { calls: number } {
  const fn = async (key: string) => {
    fn.calls++;
    const p = table[key];
    if (!p) throw new UnauthenticatedError('invalid_api_key', 'the API key is not valid');
    return p;
  };
  fn.calls = 0;
  return fn;
}

export interface TestGateway {
  base: string;
  close(): Promise<void>;
}

/** The gateway's HTTP app on a loopback port, with the given routes and no gRPC services behind it. */
export async function serveApp(options: { routes: RouteSource[]; authenticate: Authenticator; rateLimiter?: RateLimiter; rateLimits?: RateLimitConfig; publicBaseUrl?: string }): Promise<TestGateway> {
  const publicBaseUrl = options.publicBaseUrl ?? 'https://reviews.acme.test';
  const app = createApp({
    authenticate: options.authenticate,
    rateLimiter: options.rateLimiter ?? createRateLimiter({ config: options.rateLimits ?? { windowSeconds: 60, perPlan: { trial: 1000, standard: 1000, pro: 1000 } }, keyPrefix: 'test:' }),
    routes: options.routes,
    clients: {} as GatewayClients,
    publicBaseUrl,
    health: new Health(),
    logger: testLogger('gateway-test'),
  });
  const server = http.createServer(app);
  server.on('clientError', clientErrorHandler(publicBaseUrl));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** Sends exact bytes (which fetch would refuse to send) and parses the HTTP/1.1 answer. */
export function rawRequest(base: string, request: Buffer | string): Promise<RawResponse> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.end(request));
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, ...rest] = text.split('\r\n\r\n');
      const [statusLine, ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      const raw = rest.join('\r\n\r\n');
      let body: unknown = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        /* not JSON: keep the text */
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
    });
  });
}

/** Routes exercising every feature of the registry: body, params, query, sends, own errors, no body. */
export function widgetRoutes(calls: HandlerContext<unknown, unknown, unknown>[]): Route[] {
  const record = async (ctx: HandlerContext<unknown, unknown, unknown>) => {
    calls.push(ctx);
    return {};
  };
  const Recipient = z.object({ name: z.string().optional(), email: z.email().optional(), phone: z.string().optional() });
  return [
    defineRoute({
      method: 'POST',
      path: '/widgets',
      operationId: 'createWidget',
      summary: 'Create a widget',
      tags: ['widgets'],
      auth: 'apiKey',
      scope: 'cascades:write',
      rateLimited: false,
      sends: ({ body }) => body.send === true,
      request: { body: z.object({ locationId: z.string().min(1), send: z.boolean().default(false), recipients: z.array(Recipient).min(1).max(5) }) },
      responses: { 202: { description: 'Accepted', body: z.object({ id: z.string(), queued: z.number().int() }) } },
      errors: [404, 'channel_not_configured'],
      example: { body: { locationId: 'loc_1', send: true, recipients: [{ email: 'ann@example.com' }] } },
      handler: async (ctx) => {
        calls.push(ctx as HandlerContext<unknown, unknown, unknown>);
        if (ctx.body.locationId === 'missing') throw new NotFoundError('location');
        if (ctx.body.locationId === 'unconfigured') throw new ConflictError('channel_not_configured', 'EMAIL is not configured');
        return { body: { id: 'w_1', queued: ctx.body.recipients.length }, replayed: ctx.body.locationId === 'replayed' };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/widgets/{id}',
      operationId: 'getWidget',
      summary: 'Read a widget',
      tags: ['widgets'],
      auth: 'apiKey',
      scope: 'cascades:read',
      rateLimited: true,
      request: { params: z.object({ id: z.string().regex(/^w_\w+$/) }), query: z.object({ limit: z.coerce.number().int().min(1).max(10).optional() }) },
      responses: { 200: { description: 'The widget', body: z.object({ id: z.string(), limit: z.number().int().nullable() }) } },
      handler: async (ctx) => {
        calls.push(ctx as HandlerContext<unknown, unknown, unknown>);
        return { body: { id: ctx.params.id, limit: ctx.query.limit ?? null } };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: '/widgets/{id}',
      operationId: 'deleteWidget',
      summary: 'Delete a widget',
      tags: ['widgets'],
      auth: 'apiKey',
      scope: 'cascades:write',
      rateLimited: false,
      responses: { 204: { description: 'Deleted' } },
      handler: record,
    }),
  ];
}
