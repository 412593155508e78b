import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { buildDist, createTestDatabase, waitFor, type TestDatabase } from '@rrs/testkit';

/** The service alone, as its container runs it: `node dist/main.js` configured by env. */
const DIR = join(__dirname, '..');

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe('contacts main', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    buildDist();
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  it('starts from env, becomes ready, and exits 0 on SIGTERM', async () => {
    const [grpcPort, opsPort] = [await freePort(), await freePort()];
    const child = spawn(process.execPath, ['dist/main.js'], {
      cwd: DIR,
      env: { ...process.env, DATABASE_URL: db.url, GRPC_PORT: String(grpcPort), OPS_PORT: String(opsPort), LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    await waitFor(async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`)).status === 200, { timeoutMs: 15_000, what: 'readyz' });
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const lines = out.trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
    expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['started', 'shutting down', 'stopped']));
  });

  it('refuses to start without DATABASE_URL, naming it', async () => {
    const child = spawn(process.execPath, ['dist/main.js'], { cwd: DIR, env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    expect(await new Promise((resolve) => child.once('exit', resolve))).toBe(78);
    expect(err).toContain('contacts: invalid configuration: DATABASE_URL:');
  });
});
