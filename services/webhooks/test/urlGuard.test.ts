import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { classifyAddress, UrlGuard, WebhookUrlNotAllowed, type Resolver } from '../src/urlGuard';
import { postWebhook } from '../src/sender';

/** Every refused range, with one address in it and the range name reported. */
export const REFUSED: Array<[string, string]> = [
  ['10.1.2.3', 'private'],
  ['172.16.5.4', 'private'],
  ['192.168.1.1', 'private'],
  ['127.0.0.1', 'loopback'],
  ['127.9.9.9', 'loopback'],
  ['::1', 'loopback'],
  ['169.254.169.254', 'cloudMetadata'],
  ['fd00:ec2::254', 'cloudMetadata'],
  ['169.254.10.1', 'linkLocal'],
  ['fe80::1', 'linkLocal'],
  ['fc00::1', 'uniqueLocal'],
  ['fd12:3456::1', 'uniqueLocal'],
  ['224.0.0.1', 'multicast'],
  ['ff02::1', 'multicast'],
  ['100.64.0.1', 'carrierGradeNat'],
  ['100.127.255.254', 'carrierGradeNat'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['::', 'unspecified'],
  ['255.255.255.255', 'broadcast'],
  ['::ffff:127.0.0.1', 'ipv4Mapped'],
  ['::ffff:8.8.8.8', 'ipv4Mapped'],
  ['::7f00:1', 'ipv4Compatible'],
  ['64:ff9b::a00:1', 'rfc6052'],
  ['2002:a00:1::1', '6to4'],
  ['2001::1', 'teredo'],
  ['192.0.2.1', 'reserved'],
  ['198.18.0.1', 'reserved'],
  ['240.0.0.1', 'reserved'],
];

const PUBLIC_V4 = '93.184.216.34';
const PUBLIC_V6 = '2606:2800:220:1:248:1893:25c8:1946';

function fakeDns(table: Record<string, string[]>): Resolver {
  return async (host) => {
    const found = table[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found;
  };
}

async function refusal(check: Promise<unknown>): Promise<WebhookUrlNotAllowed> {
  const err = await check.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(WebhookUrlNotAllowed);
  return err as WebhookUrlNotAllowed;
}

describe('address classification', () => {
  it.each(REFUSED)('refuses %s (%s)', (address, range) => {
    expect(classifyAddress(address, false)).toEqual({ allowed: false, range });
  });

  it('allows public unicast addresses', () => {
    expect(classifyAddress(PUBLIC_V4, false)).toEqual({ allowed: true, loopback: false });
    expect(classifyAddress(PUBLIC_V6, false)).toEqual({ allowed: true, loopback: false });
  });

  it('allows loopback only with the dev setting, and nothing else with it', () => {
    expect(classifyAddress('127.0.0.1', true)).toEqual({ allowed: true, loopback: true });
    expect(classifyAddress('::1', true)).toEqual({ allowed: true, loopback: true });
    expect(classifyAddress('10.0.0.1', true)).toEqual({ allowed: false, range: 'private' });
    expect(classifyAddress('169.254.169.254', true)).toEqual({ allowed: false, range: 'cloudMetadata' });
  });
});

describe('URL guard at registration', () => {
  const guard = new UrlGuard({ allowLoopbackHttp: false, resolve: fakeDns({ 'hooks.example.com': [PUBLIC_V4, PUBLIC_V6] }) });

  it('accepts https to a host whose every address is public', async () => {
    const checked = await guard.check('https://hooks.example.com/rrs?x=1');
    expect(checked.url.toString()).toBe('https://hooks.example.com/rrs?x=1');
    expect(checked.addresses).toEqual([{ address: PUBLIC_V4, family: 4 }, { address: PUBLIC_V6, family: 6 }]);
  });

  it.each(REFUSED)('refuses a literal %s (%s)', async (address, range) => {
    const host = address.includes(':') ? `[${address}]` : address;
    const err = await refusal(guard.check(`https://${host}/hook`));
    expect(err.details).toEqual({ reason: 'address', range });
  });

  /** What a refusal of a host name may say: the same for every range and for a name that does not resolve. */
  const HOST_REFUSAL = { kind: 'invalid', code: 'webhook_url_not_allowed', message: 'the webhook host must resolve to public addresses only', details: { reason: 'host_not_public' } };

  it.each(REFUSED)('refuses a host name resolving to %s (%s), even next to a public address, without saying what it resolves to', async (address, range) => {
    const guard = new UrlGuard({ allowLoopbackHttp: false, resolve: fakeDns({ 'mixed.example.com': [PUBLIC_V4, address] }) });
    const err = await refusal(guard.check('https://mixed.example.com/hook'));
    expect({ kind: err.kind, code: err.code, message: err.message, details: err.details }).toEqual(HOST_REFUSAL);
    expect(JSON.stringify({ message: err.message, details: err.details })).not.toContain(range);
  });

  it('answers a name that does not resolve exactly as a name resolving to an internal address (no oracle of internal DNS)', async () => {
    const guard = new UrlGuard({ allowLoopbackHttp: false, resolve: fakeDns({ 'db.internal': ['10.0.0.5'], 'meta.internal': ['169.254.169.254'], 'empty.internal': [] }) });
    for (const host of ['db.internal', 'meta.internal', 'empty.internal', 'nothing.internal']) {
      const err = await refusal(guard.check(`https://${host}/hook`));
      expect({ kind: err.kind, code: err.code, message: err.message, details: err.details }).toEqual(HOST_REFUSAL);
    }
  });

  it.each([
    ['http to a public host', 'http://hooks.example.com/x', 'scheme'],
    ['ftp', 'ftp://hooks.example.com/x', 'scheme'],
    ['credentials in the URL', 'https://user:pw@hooks.example.com/x', 'credentials'],
    ['not a URL', 'hooks.example.com/x', 'invalid_url'],
    ['a host that does not resolve', 'https://nowhere.example.com/x', 'host_not_public'],
    ['a too long URL', `https://hooks.example.com/${'a'.repeat(2100)}`, 'invalid_url'],
    ['an IPv4 shorthand of loopback', 'https://0x7f.1/x', 'address'],
    ['a decimal IPv4 of loopback', 'https://2130706433/x', 'address'],
  ])('refuses %s', async (_label, url, reason) => {
    expect((await refusal(guard.check(url))).reason).toBe(reason);
  });

  it('admits plain http only to loopback, and only with the dev setting', async () => {
    const dev = new UrlGuard({ allowLoopbackHttp: true, resolve: fakeDns({ localhost: ['127.0.0.1', '::1'], 'hooks.example.com': [PUBLIC_V4] }) });
    await expect(dev.check('http://localhost:3000/hook')).resolves.toMatchObject({ addresses: [{ address: '127.0.0.1' }, { address: '::1' }] });
    await expect(dev.check('http://127.0.0.1:3000/hook')).resolves.toBeDefined();
    expect((await refusal(dev.check('http://hooks.example.com/hook'))).reason).toBe('scheme');
    expect((await refusal(guard.check('http://127.0.0.1:3000/hook'))).reason).toBe('scheme');
    expect((await refusal(guard.check('https://127.0.0.1:3000/hook'))).details).toEqual({ reason: 'address', range: 'loopback' });
  });
});

describe('URL guard at send time', () => {
  let server: http.Server;
  let port: number;
  const received: Array<{ host?: string }> = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      received.push({ host: req.headers.host });
      req.resume();
      res.writeHead(200).end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  beforeEach(() => (received.length = 0));

  const send = (guard: UrlGuard, url: string) => postWebhook(guard, { url, headers: {}, body: '{}', timeoutMs: 2000 });

  it.each(REFUSED)('refuses to send when the host now resolves to %s (%s): DNS rebinding', async (address, range) => {
    const dns: Record<string, string[]> = { 'rebind.example.com': [PUBLIC_V4] };
    const guard = new UrlGuard({ allowLoopbackHttp: false, resolve: fakeDns(dns) });
    await guard.check('https://rebind.example.com/hook');
    dns['rebind.example.com'] = [address];
    const result = await send(guard, 'https://rebind.example.com/hook');
    expect(result).toMatchObject({ kind: 'error' });
    // The delivery log the tenant reads says neither the range nor the address.
    expect(result.kind === 'error' && result.error).toBe('url_not_allowed: the webhook host must resolve to public addresses only');
    expect(result.kind === 'error' && result.error).not.toContain(range);
    expect(received).toEqual([]);
  });

  it('connects to the address it checked, not to a second DNS answer', async () => {
    let calls = 0;
    const guard = new UrlGuard({
      allowLoopbackHttp: true,
      resolve: async () => {
        calls += 1;
        return calls === 1 ? ['127.0.0.1'] : ['10.0.0.1'];
      },
    });
    const result = await send(guard, `http://receiver.example.com:${port}/hook`);
    expect(result).toMatchObject({ kind: 'response', status: 200 });
    expect(calls).toBe(1);
    expect(received).toEqual([{ host: `receiver.example.com:${port}` }]);
  });

  it('refuses a literal refused address at send time without connecting', async () => {
    const guard = new UrlGuard({ allowLoopbackHttp: false });
    const result = await send(guard, `http://127.0.0.1:${port}/hook`);
    expect(result).toMatchObject({ kind: 'error' });
    expect(received).toEqual([]);
  });
});
