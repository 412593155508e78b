import http from 'node:http';
import type { Logger } from 'pino';
import { registry } from './metrics';
import { listenHttp, type ListeningHttpServer } from './httpServer';

export type Check = () => Promise<void>;

export interface CheckOptions {
  /**
   * Whether the pod can do its job without this dependency. Required (the default): while the check
   * fails the pod is not ready (503). Not required: the pod keeps serving with a fallback, and a failing
   * check only marks it `degraded` in the body (200).
   */
  required?: boolean;
}

export type ReadinessStatus = 'ready' | 'degraded' | 'not_ready';

/** The body of `/readyz`. `checks` holds `ok` or the failure's message per dependency. */
export interface Readiness {
  ok: boolean;
  status: ReadinessStatus;
  checks: Record<string, string>;
  /** Failing checks the pod survives (still ready). */
  degraded: string[];
  /** Failing required checks (the pod is not ready), and `service` while starting or stopping. */
  failing: string[];
}

/**
 * Liveness says the process can make progress; readiness says it should get traffic. Readiness fails
 * while starting, while shutting down, and while a required dependency check fails; a dependency the
 * pod survives (a fallback answers) is reported as degraded but leaves the pod ready, so that losing it
 * does not take every replica out of its Service at once.
 */
export class Health {
  private readonly checks = new Map<string, { check: Check; required: boolean }>();
  private ready = false;
  private readonly listeners = new Set<(serving: boolean) => void>();

  addCheck(name: string, check: Check, options: CheckOptions = {}): void {
    this.checks.set(name, { check, required: options.required ?? true });
  }

  setReady(ready: boolean): void {
    this.ready = ready;
    for (const l of this.listeners) l(ready);
  }

  get isReady(): boolean {
    return this.ready;
  }

  onChange(listener: (serving: boolean) => void): void {
    this.listeners.add(listener);
  }

  async readiness(): Promise<Readiness> {
    const checks: Record<string, string> = {};
    const degraded: string[] = [];
    const failing: string[] = [];
    if (!this.ready) {
      checks.service = 'not ready';
      failing.push('service');
    }
    await Promise.all(
      [...this.checks].map(async ([name, { check, required }]) => {
        try {
          await withTimeout(check(), 2_000);
          checks[name] = 'ok';
        } catch (err) {
          checks[name] = (err as Error).message;
          (required ? failing : degraded).push(name);
        }
      }),
    );
    degraded.sort();
    failing.sort();
    const ok = failing.length === 0;
    return { ok, status: !ok ? 'not_ready' : degraded.length ? 'degraded' : 'ready', checks, degraded, failing };
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`check timed out after ${ms} ms`)), ms);
    p.then((v) => { clearTimeout(t); resolve(v); }, (e) => { clearTimeout(t); reject(e); });
  });
}

/** Serves /healthz, /readyz and /metrics. Returns false for any other path, so callers can chain. */
export async function serveOps(health: Health, req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean> {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/healthz') {
    send(res, 200, 'application/json', JSON.stringify({ ok: true }));
    return true;
  }
  if (path === '/readyz') {
    const r = await health.readiness();
    send(res, r.ok ? 200 : 503, 'application/json', JSON.stringify(r));
    return true;
  }
  if (path === '/metrics') {
    send(res, 200, registry.contentType, await registry.metrics());
    return true;
  }
  return false;
}

function send(res: http.ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

export type OpsServer = ListeningHttpServer;

/** A small HTTP server for services whose main transport is not HTTP (gRPC servers, bus consumers). */
export async function startOpsServer(options: { host: string; port: number; health: Health; logger: Logger }): Promise<OpsServer> {
  const server = http.createServer((req, res) => {
    serveOps(options.health, req, res).then((handled) => {
      if (!handled) send(res, 404, 'application/json', JSON.stringify({ error: 'not found' }));
    }, (err) => {
      options.logger.error({ err }, 'ops request failed');
      if (!res.headersSent) send(res, 500, 'application/json', JSON.stringify({ error: 'internal' }));
    });
  });
  server.keepAliveTimeout = 5_000;
  return listenHttp(server, options);
}
