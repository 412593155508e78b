import type http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ListeningHttpServer {
  /** The port listened on: the one asked for, or the one the system chose for port 0. */
  port: number;
  /** Stops accepting connections, closes idle keep-alive ones, and resolves once the requests in flight are answered. */
  close(): Promise<void>;
}

/**
 * Starts a small HTTP server of a service (ops endpoints, a provider's callbacks) on host:port; rejects
 * when the address cannot be had, so the service fails at start rather than running without it.
 */
export async function listenHttp(server: http.Server, options: { host: string; port: number }): Promise<ListeningHttpServer> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
