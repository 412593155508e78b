import { Health, Lifecycle, createLogger } from '../src';
import { Writable } from 'node:stream';

const quiet = () => createLogger({ service: 't', level: 'silent', destination: new Writable({ write: (_c, _e, cb) => cb() }) });

describe('Lifecycle', () => {
  it('stops parts in reverse order of start, waiting for each', async () => {
    const lc = new Lifecycle(quiet());
    const order: string[] = [];
    lc.onStop('pool', () => { order.push('pool'); });
    lc.onStop('consumer', async () => {
      await new Promise((r) => setTimeout(r, 50));
      order.push('consumer drained');
    });
    lc.onStop('server', () => { order.push('server'); });
    await lc.shutdown();
    expect(order).toEqual(['server', 'consumer drained', 'pool']);
  });

  it('runs once however often it is asked, and goes on past a part that fails or hangs', async () => {
    const lc = new Lifecycle(quiet(), 100);
    const order: string[] = [];
    lc.onStop('last', () => { order.push('last'); });
    lc.onStop('hangs', () => new Promise(() => undefined));
    lc.onStop('fails', () => { throw new Error('boom'); });
    await Promise.all([lc.shutdown(), lc.shutdown()]);
    expect(order).toEqual(['last']);
    expect(lc.isStopping).toBe(true);
  });
});

describe('Health', () => {
  it('is not ready until told, and not ready while a check fails', async () => {
    const h = new Health();
    expect((await h.readiness()).ok).toBe(false);
    h.setReady(true);
    let up = true;
    h.addCheck('db', async () => {
      if (!up) throw new Error('connection refused');
    });
    expect(await h.readiness()).toEqual({ ok: true, checks: { db: 'ok' } });
    up = false;
    expect(await h.readiness()).toEqual({ ok: false, checks: { db: 'connection refused' } });
  });
});
