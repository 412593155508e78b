import { createPool, httpStatusOf, migrate, NotFoundError, type Pool } from '@rrs/runtime';
import { createTestDatabase, type TestDatabase } from '@rrs/testkit';
import { IDEMPOTENCY_COMPONENT, IDEMPOTENCY_MIGRATIONS_DIR, purgeExpiredIdempotencyKeys, requestFingerprint, runIdempotent, canonicalJson } from '../src';

const json = { encode: (v: unknown) => Buffer.from(JSON.stringify(v)), decode: (b: Uint8Array) => JSON.parse(Buffer.from(b).toString()) };
const ORG = '0190e0e0-0000-7000-8000-000000000001';

describe('runIdempotent (real PostgreSQL)', () => {
  let db: TestDatabase;
  let pool: Pool;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: 'svc', max: 20 });
    await migrate(pool, { schema: 'svc', dir: IDEMPOTENCY_MIGRATIONS_DIR, component: IDEMPOTENCY_COMPONENT });
    await pool.query('CREATE TABLE effects (id serial PRIMARY KEY, label text)');
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  const effect = (label: string, delayMs = 0) => async (client: import('pg').PoolClient) => {
    if (delayMs) await client.query('SELECT pg_sleep($1)', [delayMs / 1000]);
    const { rows } = await client.query('INSERT INTO effects (label) VALUES ($1) RETURNING id', [label]);
    return { id: rows[0].id, label };
  };
  const count = async (label: string) => (await pool.query('SELECT count(*)::int AS n FROM effects WHERE label = $1', [label])).rows[0].n;
  /** The error `call` rejects with, with the HTTP status the gateway answers its kind with. */
  const refusal = (call: Promise<unknown>) => call.then(
    () => { throw new Error('expected a rejection'); },
    (err: unknown) => Object.assign(err as Error, { status: httpStatusOf(err) }),
  );

  it('replays the saved response and runs the effect once', async () => {
    const req = { organizationId: ORG, key: 'k1', fingerprint: requestFingerprint('POST', '/x', { a: 1, b: 2 }) };
    const first = await runIdempotent(pool, req, json, effect('one'));
    const again = await runIdempotent(pool, { ...req, fingerprint: requestFingerprint('POST', '/x', { b: 2, a: 1 }) }, json, effect('one'));
    expect(first.replayed).toBe(false);
    expect(again).toEqual({ result: first.result, replayed: true });
    expect(await count('one')).toBe(1);
  });

  it('refuses the same key with another body: 409 idempotency_key_reused', async () => {
    const req = { organizationId: ORG, key: 'k2', fingerprint: requestFingerprint('POST', '/x', { a: 1 }) };
    await runIdempotent(pool, req, json, effect('two'));
    expect(await refusal(runIdempotent(pool, { ...req, fingerprint: requestFingerprint('POST', '/x', { a: 2 }) }, json, effect('two')))).toMatchObject({ status: 409, code: 'idempotency_key_reused' });
    expect(await count('two')).toBe(1);
  });

  it('gives concurrent duplicates exactly one effect; the others are told the key is in use', async () => {
    const req = { organizationId: ORG, key: 'k3', fingerprint: 'f' };
    const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => runIdempotent(pool, req, json, effect('three', 300))));
    const ok = outcomes.filter((o) => o.status === 'fulfilled');
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(ok).toHaveLength(1);
    expect(refused.every((r) => httpStatusOf(r.reason) === 409 && r.reason.code === 'idempotency_key_in_use')).toBe(true);
    expect(await count('three')).toBe(1);
    expect((await runIdempotent(pool, req, json, effect('three'))).replayed).toBe(true);
  });

  it('saves nothing when the effect fails, so the key can be used again', async () => {
    const req = { organizationId: ORG, key: 'k4', fingerprint: 'f' };
    await expect(runIdempotent(pool, req, json, async () => {
      throw new NotFoundError('location');
    })).rejects.toMatchObject({ code: 'not_found' });
    expect((await runIdempotent(pool, req, json, effect('four'))).replayed).toBe(false);
  });

  it('coalesced: the same answers (replay, another body refused, nothing saved on failure) in three requests fewer', async () => {
    const pg = await import('pg');
    const requests = jest.spyOn(pg.default.Client.prototype, 'query');
    try {
      const req = { organizationId: ORG, key: 'k-coalesced', fingerprint: 'f' };
      await expect(runIdempotent(pool, req, json, async () => {
        throw new NotFoundError('location');
      }, { coalesced: true })).rejects.toMatchObject({ code: 'not_found' });
      requests.mockClear();
      const first = await runIdempotent(pool, req, json, effect('coalesced'), { coalesced: true });
      // BEGIN with the key's lock and the saved answer's read, the effect, the record with COMMIT (6 without).
      expect(requests).toHaveBeenCalledTimes(3);
      expect(first.replayed).toBe(false);
      expect(await runIdempotent(pool, req, json, effect('coalesced'), { coalesced: true })).toEqual({ result: first.result, replayed: true });
      expect(await refusal(runIdempotent(pool, { ...req, fingerprint: 'g' }, json, effect('coalesced'), { coalesced: true }))).toMatchObject({ status: 409, code: 'idempotency_key_reused' });
      expect(await count('coalesced')).toBe(1);
    } finally {
      requests.mockRestore();
    }
  });

  it('coalesced with reads: the effect\'s first reads travel with the key\'s lock and its saved answer\'s read, and reach the effect in order', async () => {
    const pg = await import('pg');
    const requests = jest.spyOn(pg.default.Client.prototype, 'query');
    try {
      const reads = [{ text: 'SELECT $1::int AS n', values: [7] }, { text: 'SELECT count(*)::int AS effects FROM effects' }];
      const seen: unknown[] = [];
      const req = { organizationId: ORG, key: 'k-reads', fingerprint: 'f' };
      const first = await runIdempotent(pool, req, json, async (client, results) => {
        seen.push(results.map((result) => result.rows[0]));
        return effect('reads')(client);
      }, { coalesced: true, reads });
      // BEGIN with the lock, the saved answer's read and both reads; the effect; the record with COMMIT.
      expect(requests).toHaveBeenCalledTimes(3);
      expect(seen).toEqual([[{ n: 7 }, { effects: expect.any(Number) }]]);
      // Without a key the reads still come first, with BEGIN.
      requests.mockClear();
      await runIdempotent(pool, undefined, json, async (client, results) => {
        seen.push(results.map((result) => result.rows[0]));
        return effect('reads')(client);
      }, { coalesced: true, reads });
      // BEGIN with both reads, the effect's insert, COMMIT.
      expect(requests).toHaveBeenCalledTimes(3);
      expect(seen[1]).toEqual([{ n: 7 }, { effects: expect.any(Number) }]);
      // A replay answers the saved response; the effect does not run.
      expect(await runIdempotent(pool, req, json, async () => { throw new Error('ran again'); }, { coalesced: true, reads })).toEqual({ result: first.result, replayed: true });
      expect(await count('reads')).toBe(2);
    } finally {
      requests.mockRestore();
    }
  });

  it('scopes keys to the organization', async () => {
    const other = '0190e0e0-0000-7000-8000-000000000002';
    await runIdempotent(pool, { organizationId: ORG, key: 'k5', fingerprint: 'a' }, json, effect('five'));
    expect((await runIdempotent(pool, { organizationId: other, key: 'k5', fingerprint: 'b' }, json, effect('five'))).replayed).toBe(false);
  });

  it('expires keys after their TTL and purges them', async () => {
    const req = { organizationId: ORG, key: 'k6', fingerprint: 'a' };
    await runIdempotent(pool, req, json, effect('six'), { ttlMs: 1 });
    await new Promise((r) => setTimeout(r, 20));
    expect(await purgeExpiredIdempotencyKeys(pool)).toBeGreaterThanOrEqual(1);
    expect((await runIdempotent(pool, { ...req, fingerprint: 'other' }, json, effect('six'))).replayed).toBe(false);
  });

  it('drops a connection that died inside the effect: nothing is saved and the key works again on a fresh connection', async () => {
    const single = createPool({ url: db.url, schema: 'svc', max: 1 });
    const backendPid = async () => (await single.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    try {
      const dead = await backendPid();
      const req = { organizationId: ORG, key: 'k7', fingerprint: 'a' };
      await expect(runIdempotent(single, req, json, async (client) => {
        await pool.query('SELECT pg_terminate_backend($1)', [dead]);
        return effect('seven')(client);
      })).rejects.toThrow();
      expect(await count('seven')).toBe(0);
      expect((await runIdempotent(single, req, json, effect('seven'))).replayed).toBe(false);
      expect(await count('seven')).toBe(1);
      expect(await backendPid()).not.toBe(dead);
    } finally {
      await single.end();
    }
  });

  it('canonicalizes nested bodies', () => {
    expect(canonicalJson({ b: [{ y: 1, x: 2 }], a: null, c: undefined })).toBe('{"a":null,"b":[{"x":2,"y":1}]}');
  });
});
