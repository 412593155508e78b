import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './servers';
import { buildDist } from './serviceProcess';

const MAIN = join(__dirname, '..', '..', 'all-in-one', 'dist', 'main.js');

/** `npm start`'s process, run as a user would: every service in one process, answering real HTTP. */
export interface AllInOneProcess {
  child: ChildProcess;
  /** Everything it wrote, stdout and stderr. */
  output(): string;
  /** The demo organization's API key it printed. */
  apiKey: string;
}

/** Starts `packages/all-in-one/dist/main.js` with `env`; resolves once it has printed the demo API key. */
export function startAllInOne(env: Record<string, string>): Promise<AllInOneProcess> {
  buildDist();
  // METRICS_PORT 0 (any free port) unless given: test processes run side by side, the default 9472 would collide.
  const child = spawn(process.execPath, [MAIN], { env: { ...process.env, LOG_LEVEL: 'warn', METRICS_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not started within 45 s:\n${out}`)), 45_000);
    child.stdout!.on('data', () => {
      const printed = /Demo organization API key: (rrs_\w+)/.exec(out);
      if (printed) {
        clearTimeout(timer);
        resolve({ child, output: () => out, apiKey: printed[1] });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before starting:\n${out}`));
    });
  });
}

/** SIGTERM, then the exit code. */
export function stopAllInOne(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    child.once('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

/** An all-in-one of a test's own: fresh data directory and embedded PostgreSQL on free ports. */
export interface TestAllInOne extends AllInOneProcess {
  /** `http://127.0.0.1:<port>`, the service's origin. */
  baseUrl: string;
  /** Stops it and deletes its data. */
  remove(): Promise<void>;
}

export async function startTestAllInOne(env: Record<string, string> = {}): Promise<TestAllInOne> {
  const dataDir = mkdtempSync(join(tmpdir(), 'rrs-aio-'));
  // As root, embedded PostgreSQL runs as the `postgres` user, which must be able to enter the folder.
  chmodSync(dataDir, 0o755);
  const port = await freePort();
  const started = await startAllInOne({ PORT: String(port), EMBEDDED_PG_PORT: String(await freePort()), DATA_DIR: dataDir, ...env }).catch((err: unknown) => {
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  });
  return {
    ...started,
    baseUrl: `http://127.0.0.1:${port}`,
    async remove() {
      await stopAllInOne(started.child);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
