import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, rmdirSync, statSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..', '..');
const CACHE = join(ROOT, 'node_modules', '.cache');
const STAMP = join(CACHE, 'rrs-dist-built');
const LOCK = join(CACHE, 'rrs-dist-build.lock');

/** Newest modification time (ms) of the TypeScript sources every workspace compiles. */
function newestSource(): number {
  let newest = 0;
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  for (const group of ['packages', 'services']) {
    for (const workspace of readdirSync(join(ROOT, group))) {
      const src = join(ROOT, group, workspace, 'src');
      if (existsSync(src)) walk(src);
    }
  }
  for (const extra of ['proto/src']) walk(join(ROOT, extra));
  return newest;
}

const sleepSync = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Rebuilds every workspace's `dist` (what a container runs) when a source is newer than the last build.
 * Test files run in parallel processes and a build deletes `dist` first, so builds take a lock (a
 * directory) and a process that finds `dist` current does not build: a running service never sees its
 * files removed under it.
 */
let built = false;
export function buildDist(): void {
  if (built) return;
  mkdirSync(CACHE, { recursive: true });
  // Bounded: 60 s of waiting; a lock older than 2 minutes was left by a process that died.
  for (let attempt = 0; ; attempt++) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      if (attempt >= 600) throw new Error(`another test process holds ${LOCK}`);
      try {
        if (Date.now() - statSync(LOCK).mtimeMs > 120_000) rmdirSync(LOCK);
      } catch {
        // Released meanwhile.
      }
      sleepSync(100);
    }
  }
  try {
    const stamp = existsSync(STAMP) ? statSync(STAMP).mtimeMs : 0;
    if (newestSource() >= stamp) {
      const startedAt = new Date();
      execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'ignore' });
      writeFileSync(STAMP, '');
      // Sources saved during the build are newer than the stamp: the next test process builds again.
      utimesSync(STAMP, startedAt, startedAt);
    }
    built = true;
  } finally {
    rmdirSync(LOCK);
  }
}

/** A service run as its container runs it: `node dist/main.js` in `services/<name>`, configured by env. */
export interface ServiceProcess {
  /** Everything it wrote, stdout and stderr. */
  output(): string;
  stderr(): string;
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

export function startServiceProcess(service: string, env: Record<string, string>): ServiceProcess {
  buildDist();
  const child: ChildProcess = spawn(process.execPath, ['dist/main.js'], {
    cwd: join(ROOT, 'services', service),
    // METRICS_PORT 0 (any free port) unless given: the gateway's default 9472 would collide between tests run side by side.
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => {
    err += d;
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    output: () => out,
    stderr: () => err,
    exited,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** `/readyz` of a running service: its status and body (`ok`, `status`, `checks`, `degraded`, `failing`). */
export async function readyz(port: number): Promise<{ status: number; body: { ok: boolean; status: string; checks: Record<string, string>; degraded: string[]; failing: string[] } }> {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: res.status, body: (await res.json()) as never };
}
