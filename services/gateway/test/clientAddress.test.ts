import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { clientAddress } from '../src/http/auth/kinds';

/**
 * The address the per-address limits count is express's `req.ip` in every case; without X-Forwarded-For
 * it is read from the socket directly (proxy-addr would find no other address, whatever TRUST_PROXY says).
 */
describe('clientAddress', () => {
  async function addressesSeen(trustProxy: boolean | number, headers: Record<string, string>): Promise<{ ours: string; express: string | undefined }> {
    const app = express();
    app.set('trust proxy', trustProxy);
    app.get('/', (req, res) => {
      res.json({ ours: clientAddress(req), express: req.ip });
    });
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { headers });
      return (await res.json()) as { ours: string; express: string | undefined };
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }

  it.each([
    [false, {}],
    [1, {}],
    [false, { 'x-forwarded-for': '203.0.113.7' }],
    [1, { 'x-forwarded-for': '203.0.113.7' }],
    [1, { 'x-forwarded-for': '198.51.100.1, 203.0.113.7' }],
    [2, { 'x-forwarded-for': '198.51.100.1, 203.0.113.7' }],
  ] as const)('with TRUST_PROXY %s and headers %j is what express says', async (trust, headers) => {
    const seen = await addressesSeen(trust, headers);
    expect(seen.ours).toBe(seen.express);
  });

  it('is the forwarded address behind a trusted proxy, the socket address otherwise', async () => {
    expect((await addressesSeen(1, { 'x-forwarded-for': '203.0.113.7' })).ours).toBe('203.0.113.7');
    expect((await addressesSeen(1, {})).ours).toBe('127.0.0.1');
    expect((await addressesSeen(false, { 'x-forwarded-for': '203.0.113.7' })).ours).toBe('127.0.0.1');
  });
});
