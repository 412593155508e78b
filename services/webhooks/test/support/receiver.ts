import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  path: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

export type Reply = { status: number; headers?: Record<string, string>; body?: string } | { hang: true };

/** A local webhook receiver whose answers a test scripts per request; records what it got. */
export class Receiver {
  readonly received: ReceivedWebhook[] = [];
  private server!: http.Server;
  private readonly open = new Set<http.ServerResponse>();
  private readonly hanging = new Set<http.ServerResponse>();
  /** Decides each answer from the requests received so far (the current one included). */
  reply: (req: ReceivedWebhook, all: ReceivedWebhook[]) => Reply = () => ({ status: 200 });
  port = 0;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const got: ReceivedWebhook = {
          path: req.url ?? '',
          headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : (v ?? '')])),
          body: Buffer.concat(chunks).toString('utf8'),
          at: Date.now(),
        };
        this.received.push(got);
        const reply = this.reply(got, this.received.filter((x) => x.path === got.path));
        if ('hang' in reply) {
          this.open.add(res);
          this.hanging.add(res);
          res.on('close', () => {
            this.open.delete(res);
            this.hanging.delete(res);
          });
          return;
        }
        res.writeHead(reply.status, reply.headers ?? {}).end(reply.body ?? '');
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  at(path: string): ReceivedWebhook[] {
    return this.received.filter((r) => r.path === path);
  }

  /** Answers every request left hanging so far; returns how many there were. */
  answerHanging(reply: { status: number; body?: string }): number {
    const waiting = [...this.hanging];
    this.hanging.clear();
    for (const res of waiting) res.writeHead(reply.status).end(reply.body ?? '');
    return waiting.length;
  }

  async stop(): Promise<void> {
    for (const res of this.open) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
