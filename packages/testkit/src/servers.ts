import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Servers of a test's own, on free loopback ports, for tests that stop and restart a dependency (the
 * shared servers on the standard ports are never stopped). Each keeps its data across a restart (a NATS
 * JetStream store directory) and is removed by `remove()`.
 */
export interface PrivateServer {
  url: string;
  port: number;
  /** (Re)starts it on the same port and data; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Kills it (SIGKILL: an outage, not a shutdown) and waits for it to exit. */
  stop(): Promise<void>;
  /** Stops it and deletes its data. */
  remove(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function privateServer(command: string, args: (port: number, dir: string) => string[], scheme: string): Promise<PrivateServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `rrs-${command}-`));
  let child: ChildProcess | undefined;
  const stop = async (): Promise<void> => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGKILL');
    await exited;
  };
  const start = async (): Promise<void> => {
    if (child) return;
    const started = spawn(command, args(port, dir), { stdio: 'ignore' });
    child = started;
    const failed = new Promise<never>((_, reject) => {
      started.once('error', reject);
      started.once('exit', (code) => reject(new Error(`${command} exited with ${code}`)));
    });
    failed.catch(() => undefined);
    // Bounded: 200 tries 50 ms apart.
    for (let attempt = 0; attempt < 200; attempt++) {
      if (await Promise.race([accepts(port), failed])) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await stop();
    throw new Error(`${command} did not accept connections on port ${port}`);
  };
  await start();
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    port,
    start,
    stop,
    async remove() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A private `nats-server` with JetStream (file store kept across restarts). */
export function startPrivateNats(): Promise<PrivateServer> {
  return privateServer('nats-server', (port, dir) => ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], 'nats');
}

/** A private `redis-server` without persistence. */
export function startPrivateRedis(): Promise<PrivateServer> {
  return privateServer('redis-server', (port, dir) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir], 'redis');
}
