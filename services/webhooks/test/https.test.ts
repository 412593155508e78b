import https from 'node:https';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { postWebhook } from '../src/sender';
import { UrlGuard } from '../src/urlGuard';

/**
 * https delivery through the pinned lookup: the connection goes to the checked address while TLS still
 * sends the host name (SNI) and verifies the certificate against it. The fixture certificate is a
 * self-signed one for `hooks.test`, valid until 2126.
 */
const CERT = readFileSync(join(__dirname, 'fixtures', 'hooks.test.crt'), 'utf8');
const KEY = readFileSync(join(__dirname, 'fixtures', 'hooks.test.key'), 'utf8');

describe('https delivery', () => {
  let server: https.Server;
  let port: number;
  const seen: Array<{ servername: string | false | null; body: string }> = [];
  const guard = new UrlGuard({ allowLoopbackHttp: true, resolve: async () => ['127.0.0.1'] });

  beforeAll(async () => {
    server = https.createServer({ cert: CERT, key: KEY }, (req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        seen.push({ servername: (req.socket as TLSSocket).servername, body });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  beforeEach(() => (seen.length = 0));

  const send = (host: string, ca?: string[]) => postWebhook(guard, { url: `https://${host}:${port}/hook`, headers: {}, body: '{"a":1}', timeoutMs: 3000, ca });

  it('connects to the checked address with the host name as SNI and a verified certificate', async () => {
    expect(await send('hooks.test', [CERT])).toMatchObject({ kind: 'response', status: 200, body: 'ok' });
    expect(seen).toEqual([{ servername: 'hooks.test', body: '{"a":1}' }]);
  });

  it('fails an attempt whose certificate does not name the host', async () => {
    const result = await send('other.test', [CERT]);
    expect(result).toEqual({ kind: 'error', error: 'connection_error: ERR_TLS_CERT_ALTNAME_INVALID', durationMs: expect.any(Number) });
    expect(seen).toEqual([]);
  });

  it('fails an attempt whose certificate is not trusted', async () => {
    const result = await send('hooks.test');
    expect(result).toEqual({ kind: 'error', error: 'connection_error: DEPTH_ZERO_SELF_SIGNED_CERT', durationMs: expect.any(Number) });
    expect(seen).toEqual([]);
  });
});
