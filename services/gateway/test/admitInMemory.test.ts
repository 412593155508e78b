import type { Request, Response } from 'express';
import { UnauthenticatedError, registry } from '@rrs/runtime';
import { createFailureLimiters } from '../src/addressLimits';
import { cachedAuthenticator } from '../src/authCache';
import { apiKeyGate, type AuthRequirement } from '../src/http/auth';
import { createRateLimiter } from '../src/rateLimit';
import { principal } from './support';

/** The parts of a request the API key gate reads. */
function request(authorization: string, ip = '203.0.113.7'): Request {
  return { ip, rawHeaders: ['Authorization', authorization], get: (name: string) => (name.toLowerCase() === 'authorization' ? authorization : undefined) } as unknown as Request;
}

function response(): Response & { fields: Record<string, string> } {
  const fields: Record<string, string> = {};
  return { fields, setHeader: (name: string, value: string) => (fields[name.toLowerCase()] = value) } as unknown as Response & { fields: Record<string, string> };
}

async function lookupCount(outcome: string): Promise<number> {
  const metric = await registry.getSingleMetric('gateway_auth_cache_total')!.get();
  return metric.values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

const ping: AuthRequirement = { auth: 'apiKey', scope: null, rateLimited: true };

/**
 * The gate answers at once (not a promise) when the address, the key and a quota point are all in this
 * replica's memory, and answers exactly as the asynchronous path does: the same principal, RateLimit
 * fields, counts and refusals.
 */
describe('API key admission from memory', () => {
  const p = principal({ plan: 'trial' });
  const standard = principal({ plan: 'standard' });
  let lookups = 0;
  const setup = () => {
    const authenticate = cachedAuthenticator(
      async (key) => {
        lookups++;
        if (key === 'standard') return standard;
        if (key !== 'good') throw new UnauthenticatedError('invalid_api_key', 'unknown key');
        return p;
      },
      { ttlMs: 4000, keyPrefix: 'mem:' },
    );
    // trial: 3 a window, chunks of 1, so every point is a reservation of the (in-memory) store; standard: chunks of 6.
    const rateLimiter = createRateLimiter({ config: { windowSeconds: 60, perPlan: { trial: 3, standard: 600, pro: 3000 } }, keyPrefix: 'mem:' });
    const failures = createFailureLimiters({ keyPrefix: 'mem:' }).apiKeyAuth;
    return apiKeyGate({ authenticate, rateLimiter, failures });
  };

  it('waits the first time, then admits synchronously with the same fields and counts', async () => {
    const gate = setup();
    const hitsBefore = await lookupCount('local_hit');
    const first = response();
    const admitted = gate.admit(ping, request('Bearer good'), first);
    expect(admitted).toBeInstanceOf(Promise);
    expect(await admitted).toBe(p);
    expect(lookups).toBe(1);

    // The key is cached and the address was seen clean, but a trial chunk is one point: the quota waits.
    const second = response();
    expect(gate.admit(ping, request('Bearer good'), second)).toBeInstanceOf(Promise);

    // Without the quota (a route that is not rate-limited) everything is in memory: answered at once.
    const unlimited = response();
    expect(gate.admit({ ...ping, rateLimited: false }, request('Bearer good'), unlimited)).toBe(p);
    expect(unlimited.fields).toEqual({});
    expect(lookups).toBe(1);
    expect((await lookupCount('local_hit')) - hitsBefore).toBe(2);
    expect(first.fields).toEqual({ 'ratelimit-policy': '"trial";q=3;w=60', ratelimit: '"trial";r=2;t=60' });
  });

  it('spends the held chunk synchronously, and waits for the next reservation', async () => {
    const gate = setup();
    const answers: Array<{ sync: boolean; fields: Record<string, string> }> = [];
    for (let i = 0; i < 8; i++) {
      const res = response();
      const admitted = gate.admit(ping, request('Bearer standard'), res);
      answers.push({ sync: !(admitted instanceof Promise), fields: res.fields });
      expect(await admitted).toBe(standard);
    }
    // The first waits for the key's lookup and reserves a chunk of 6; 2–6 spend it; 7 reserves again.
    expect(answers.map((a) => a.sync)).toEqual([false, true, true, true, true, true, false, true]);
    expect(answers.map((a) => a.fields.ratelimit)).toEqual([599, 598, 597, 596, 595, 594, 593, 592].map((r) => `"standard";r=${r};t=60`));
  });

  it('refuses a window used up from memory with the same 429 and fields', async () => {
    const gate = setup();
    for (let i = 0; i < 3; i++) await gate.admit(ping, request('Bearer good'), response());
    const refused = response();
    let thrown: unknown;
    try {
      // The window is used up on this replica: answered without the store, so synchronously.
      gate.admit(ping, request('Bearer good'), refused);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ code: 'rate_limited' });
    expect(refused.fields).toMatchObject({ ratelimit: '"trial";r=0;t=60', 'retry-after': '60' });
  });

  it('never answers a refused key, a missing key or a second Authorization header from memory', async () => {
    const gate = setup();
    await expect(Promise.resolve(gate.admit(ping, request('Bearer bad'), response()))).rejects.toMatchObject({ code: 'invalid_api_key' });
    // The refusal is cached, and still answered by the asynchronous path (which counts the failure).
    const again = gate.admit(ping, request('Bearer bad'), response());
    expect(again).toBeInstanceOf(Promise);
    await expect(again).rejects.toMatchObject({ code: 'invalid_api_key' });
    await gate.admit(ping, request('Bearer good'), response());
    const twice = { ip: '203.0.113.7', rawHeaders: ['Authorization', 'Bearer good', 'authorization', 'Bearer good'], get: () => 'Bearer good' } as unknown as Request;
    await expect(Promise.resolve(gate.admit(ping, twice, response()))).rejects.toMatchObject({ code: 'invalid_api_key' });
    await expect(Promise.resolve(gate.admit(ping, { ip: '203.0.113.7', rawHeaders: [], get: () => undefined } as unknown as Request, response()))).rejects.toMatchObject({ code: 'missing_api_key' });
  });

  it('asks the failure count of an address it has not seen clean', async () => {
    const gate = setup();
    await gate.admit({ ...ping, rateLimited: false }, request('Bearer good', '203.0.113.8'), response());
    expect(gate.admit({ ...ping, rateLimited: false }, request('Bearer good', '203.0.113.8'), response())).toBe(p);
    expect(gate.admit({ ...ping, rateLimited: false }, request('Bearer good', '203.0.113.9'), response())).toBeInstanceOf(Promise);
  });
});
