import { Writable } from 'node:stream';
import { createLogger } from '../src';

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
