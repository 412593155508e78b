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
    expect(await h.readiness()).toEqual({ ok: true, status: 'ready', checks: { db: 'ok' }, degraded: [], failing: [] });
    up = false;
    expect(await h.readiness()).toEqual({ ok: false, status: 'not_ready', checks: { db: 'connection refused' }, degraded: [], failing: ['db'] });
  });

  it('stays ready while a check that is not required fails, and reports itself degraded', async () => {
    const h = new Health();
    h.setReady(true);
    let cacheUp = true;
    let dbUp = true;
    h.addCheck('cache', async () => {
      if (!cacheUp) throw new Error('Connection is closed.');
    }, { required: false });
    h.addCheck('db', async () => {
      if (!dbUp) throw new Error('connection refused');
    });
    cacheUp = false;
    expect(await h.readiness()).toEqual({ ok: true, status: 'degraded', checks: { cache: 'Connection is closed.', db: 'ok' }, degraded: ['cache'], failing: [] });
    dbUp = false;
    expect(await h.readiness()).toEqual({ ok: false, status: 'not_ready', checks: { cache: 'Connection is closed.', db: 'connection refused' }, degraded: ['cache'], failing: ['db'] });
    h.setReady(false);
    cacheUp = dbUp = true;
    expect(await h.readiness()).toMatchObject({ ok: false, status: 'not_ready', failing: ['service'] });
  });
});
