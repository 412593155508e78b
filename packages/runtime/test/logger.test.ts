import { Writable } from 'node:stream';
import { causeOf, collapseRepeats, createLogger } from '../src';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _e, cb) {
      lines.push(JSON.parse(String(chunk)));
      cb();
    },
  });
  return { logger: createLogger({ service: 'svc', destination }), lines };
}

describe('logger', () => {
  it('writes JSON lines with the service name', () => {
    const { logger, lines } = capture();
    logger.info({ cascadeId: 'c1' }, 'hello');
    expect(lines[0]).toMatchObject({ level: 'info', service: 'svc', name: 'svc', cascadeId: 'c1', msg: 'hello' });
  });

  it('never writes secrets or personal data', () => {
    const { logger, lines } = capture();
    logger.info({
      authorization: 'Bearer rrs_secret',
      apiKey: 'rrs_secret2',
      recipient: { name: 'Anna Petrova', email: 'anna@example.com', phone: '+79001234567' },
      req: { headers: { authorization: 'Bearer rrs_secret3' } },
      email: 'x@example.com',
    }, 'request');
    const text = JSON.stringify(lines[0]);
    for (const s of ['rrs_secret', 'Anna Petrova', 'anna@example.com', '+79001234567', 'x@example.com']) expect(text).not.toContain(s);
    expect(lines[0]).toMatchObject({ recipient: { name: '[redacted]', email: '[redacted]', phone: '[redacted]' } });
  });
});

describe('collapseRepeats', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

  it('writes the first failure in full, then one line per interval with the count of its repeats', async () => {
    const { logger, lines } = capture();
    const repeated = collapseRepeats(logger, { intervalMs: 300 });
    for (let i = 0; i < 1_000; i++) repeated.error({ err: refused(), stepId: `s${i}` }, 'claiming the step failed');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'error', msg: 'claiming the step failed', stepId: 's0' });
    expect((lines[0].err as { stack: string }).stack).toContain('ECONNREFUSED');
    await sleep(400);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ level: 'error', msg: 'claiming the step failed', repeated: 999, cause: 'Error ECONNREFUSED' });
    expect(lines[1].err).toBeUndefined();
    // Still failing in the next interval: one more count line, no second full line.
    for (let i = 0; i < 500; i++) repeated.error({ err: refused() }, 'claiming the step failed');
    await sleep(300);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatchObject({ repeated: 500 });
    // Quiet for a whole interval: the cause is forgotten, and its next occurrence is written in full.
    await sleep(400);
    expect(lines).toHaveLength(3);
    repeated.error({ err: refused() }, 'claiming the step failed');
    expect(lines).toHaveLength(4);
    expect(lines[3].err).toBeDefined();
    repeated.flush();
  });

  it('keeps causes, messages and levels apart', () => {
    const { logger, lines } = capture();
    const repeated = collapseRepeats(logger, { intervalMs: 60_000 });
    for (let i = 0; i < 3; i++) {
      repeated.error({ err: refused() }, 'claiming the step failed');
      repeated.error({ err: Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }) }, 'claiming the step failed');
      repeated.error({ err: refused() }, 'recording the outcome failed');
      repeated.warn({ err: refused() }, 'claiming the step failed');
    }
    expect(lines.map((l) => `${l.level} ${l.msg} ${(l.err as { code?: string }).code}`)).toEqual([
      'error claiming the step failed ECONNREFUSED',
      'error claiming the step failed 57P01',
      'error recording the outcome failed ECONNREFUSED',
      'warn claiming the step failed ECONNREFUSED',
    ]);
    repeated.flush();
  });

  it('writes the pending counts on flush (shutdown) and forgets every cause', () => {
    const { logger, lines } = capture();
    const repeated = collapseRepeats(logger, { intervalMs: 60_000 });
    for (let i = 0; i < 4; i++) repeated.warn({ err: new Error('provider down') }, 'send failed, will retry');
    repeated.warn({ err: new Error('other') }, 'send failed, will retry');
    repeated.flush();
    expect(lines.map((l) => l.repeated)).toEqual([undefined, undefined, 3]);
    repeated.warn({ err: new Error('provider down') }, 'send failed, will retry');
    expect(lines).toHaveLength(4);
    expect(lines[3].err).toBeDefined();
  });

  it('sorts errors by class and code, or by message with the numbers masked, and by what they wrap', () => {
    expect(causeOf(refused())).toBe('Error ECONNREFUSED');
    expect(causeOf(new Error('no answer within 10000 ms'))).toBe(causeOf(new Error('no answer within 250 ms')));
    expect(causeOf(new TypeError('fetch failed', { cause: refused() }))).toBe('TypeError: fetch failed <- Error ECONNREFUSED');
    expect(causeOf(undefined)).toBe('');
  });
});
