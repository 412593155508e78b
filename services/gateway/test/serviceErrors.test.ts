import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConflictError, DomainError, Health, NotFoundError, UnauthenticatedError } from '@rrs/runtime';
import { testLogger } from '@rrs/testkit';
import { createApp } from '../src/app';
import { cachedAuthenticator } from '../src/authCache';
import type { GatewayClients } from '../src/clients';
import { createRateLimiter } from '../src/rateLimit';
import { principal, tableAuthenticator } from './support';

/**
 * Errors as services answer them once they throw domain errors: a kind and a code, no HTTP status on
 * the wire. The gateway's consumers of those errors (review form, auth cache) go by kind and code.
 */
describe('domain errors from the services behind the gateway', () => {
  const TOKEN = 'AbCdEfGhIjKlMnOpQrStUv';
  const CSRF = '0123456789abcdef0123456789abcdef';
  let scheduler: Record<string, (...args: unknown[]) => Promise<unknown>>;
  let server: http.Server;
  let base = '';

  beforeAll(async () => {
    scheduler = {};
    const clients = { scheduler: new Proxy({}, { get: (_t, method: string) => (...args: unknown[]) => scheduler[method](...args) }) } as unknown as GatewayClients;
    const app = createApp({
      authenticate: tableAuthenticator({}),
      rateLimiter: createRateLimiter({ config: { windowSeconds: 60, perPlan: { trial: 10, standard: 10, pro: 10 } }, keyPrefix: 'errors:' }),
      routes: [],
      clients,
      publicBaseUrl: 'https://reviews.acme.test',
      health: new Health(),
      logger: testLogger('gateway-service-errors'),
    });
    server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const postFeedback = () =>
    fetch(`${base}/r/${TOKEN}/feedback`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `rrs_form_csrf=${CSRF}` },
      body: `csrf=${CSRF}&text=cold`,
    });

  it('the review form shows its not-found page for a link the scheduler does not know (not_found kind)', async () => {
    scheduler.getReviewForm = async () => {
      throw new NotFoundError('review request');
    };
    const res = await fetch(`${base}/r/${TOKEN}`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
  });

  it.each([
    ['feedback before a rating (conflict not_rated)', new ConflictError('not_rated', 'rate first; feedback follows a rating')],
    ['feedback the scheduler refuses (invalid kind)', new DomainError('invalid', 'invalid_request', 'feedback is too long')],
  ])('the review form sends %s back to the form', async (_label, refusal) => {
    scheduler.submitFeedback = async () => {
      throw refusal;
    };
    const res = await postFeedback();
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/r/${TOKEN}`);
  });

  it('the auth cache keeps an unauthenticated invalid_api_key answer, and only that', async () => {
    let lookups = 0;
    const known = principal();
    const auth = cachedAuthenticator(
      async (key) => {
        lookups++;
        if (key === 'known') return known;
        throw new UnauthenticatedError('invalid_api_key', 'the API key is not known');
      },
      { ttlMs: 4000, keyPrefix: 'errors:' },
    );
    await expect(auth('unknown')).rejects.toMatchObject({ kind: 'unauthenticated', code: 'invalid_api_key' });
    await expect(auth('unknown')).rejects.toMatchObject({ kind: 'unauthenticated', code: 'invalid_api_key', message: 'the API key is not known' });
    expect(lookups).toBe(1);
    expect(await auth('known')).toBe(known);
  });
});
