import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { DomainError } from '@rrs/runtime';

/**
 * The SSRF guard: a webhook may only reach public unicast addresses over https. Every address a host
 * resolves to is checked (one bad address refuses the URL), literal IPs too, at registration and again at
 * every send; a send connects to exactly the addresses that were checked, so a DNS answer that changes
 * between check and connect (rebinding) cannot slip through.
 *
 * The dev setting `allowLoopbackHttp` (all-in-one mode) additionally admits loopback addresses, and
 * plain http to them only.
 */

/** Resolves a host name to all its addresses. Injected in tests to play DNS answers that change. */
export type Resolver = (hostname: string) => Promise<string[]>;

export const systemResolver: Resolver = async (hostname) => (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

const MAX_URL_LENGTH = 2048;

/** Cloud metadata services, named apart from the link-local / unique-local ranges they sit in. */
const CLOUD_METADATA = [ipaddr.parseCIDR('169.254.169.254/32'), ipaddr.parseCIDR('fd00:ec2::254/128')];
/** IPv4-compatible IPv6 (deprecated): ipaddr.js counts it as unicast, yet some stacks reach the embedded IPv4 address. */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');

export type AddressVerdict = { allowed: true; loopback: boolean } | { allowed: false; range: string };

/**
 * Classifies one address. Only ipaddr.js's `unicast` range (public, globally routable) is allowed, plus
 * loopback when the dev setting says so; everything else — private, loopback, link-local, unique-local,
 * multicast, CGNAT 100.64/10, 0.0.0.0/8, reserved/documentation, IPv4-mapped, NAT64, 6to4, Teredo — is refused.
 */
export function classifyAddress(address: string, allowLoopback: boolean): AddressVerdict {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.parse(address);
  } catch {
    return { allowed: false, range: 'invalid' };
  }
  if (CLOUD_METADATA.some((cidr) => ip.kind() === cidr[0].kind() && ip.match(cidr))) return { allowed: false, range: 'cloudMetadata' };
  const range = ip.range();
  if (range === 'unicast' && ip.kind() === 'ipv6' && ip.match(IPV4_COMPATIBLE)) return { allowed: false, range: 'ipv4Compatible' };
  if (range === 'unicast') return { allowed: true, loopback: false };
  if (range === 'loopback' && allowLoopback) return { allowed: true, loopback: true };
  return { allowed: false, range };
}

/**
 * Why a URL is refused. `address`: a literal IP outside the public range (`range` names it; the caller
 * wrote it). `host_not_public`: a host NAME that does not resolve, or resolves to any address outside the
 * public range — one answer for both and no range, so the refusal tells nothing about how names resolve
 * inside the network the service runs in (which internal names exist, which are private or loopback).
 */
export type UrlRefusal = 'invalid_url' | 'scheme' | 'credentials' | 'host_not_public' | 'address';

/** The URL may not be called: invalid, `webhook_url_not_allowed`, with `reason` (and `range` for a literal address). */
export class WebhookUrlNotAllowed extends DomainError {
  readonly reason: UrlRefusal;
  constructor(reason: UrlRefusal, message: string, extra: Record<string, unknown> = {}, cause?: unknown) {
    super('invalid', 'webhook_url_not_allowed', message, { details: { reason, ...extra }, cause });
    this.name = 'WebhookUrlNotAllowed';
    this.reason = reason;
  }
}

export interface CheckedUrl {
  url: URL;
  /** The addresses the host resolved to, all allowed; a send connects to these only. */
  addresses: Array<{ address: string; family: 4 | 6 }>;
}

export class UrlGuard {
  constructor(private readonly options: { allowLoopbackHttp: boolean; resolve?: Resolver }) {}

  /** Parses and checks a URL; rejects with WebhookUrlNotAllowed. Call at registration and before every send. */
  async check(raw: string): Promise<CheckedUrl> {
    let url: URL;
    try {
      if (raw.length > MAX_URL_LENGTH) throw new Error('too long');
      url = new URL(raw);
    } catch (err) {
      throw new WebhookUrlNotAllowed('invalid_url', `the webhook URL must be an absolute https URL of at most ${MAX_URL_LENGTH} characters`, {}, err);
    }
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && this.options.allowLoopbackHttp)) {
      throw new WebhookUrlNotAllowed('scheme', 'the webhook URL must use https');
    }
    if (url.username || url.password) throw new WebhookUrlNotAllowed('credentials', 'the webhook URL must not carry a user name or password');
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const literal = isIP(host) !== 0;
    const notPublic = (cause?: unknown) =>
      new WebhookUrlNotAllowed('host_not_public', 'the webhook host must resolve to public addresses only', {}, cause);
    let found: string[];
    if (literal) {
      found = [host];
    } else {
      try {
        found = await (this.options.resolve ?? systemResolver)(host);
      } catch (err) {
        throw notPublic(err);
      }
      if (found.length === 0) throw notPublic();
    }
    const addresses: CheckedUrl['addresses'] = [];
    let allLoopback = true;
    for (const address of found) {
      const verdict = classifyAddress(address, this.options.allowLoopbackHttp);
      if (!verdict.allowed && !literal) throw notPublic();
      if (!verdict.allowed) throw new WebhookUrlNotAllowed('address', `the webhook URL's address is in the ${verdict.range} range, which webhooks may not reach`, { range: verdict.range });
      allLoopback &&= verdict.loopback;
      addresses.push({ address, family: isIP(address) === 6 ? 6 : 4 });
    }
    if (url.protocol === 'http:' && !allLoopback) throw new WebhookUrlNotAllowed('scheme', 'the webhook URL must use https');
    return { url, addresses };
  }
}

/** A socket `lookup` that answers only the already-checked addresses, never asking DNS again. */
export function pinnedLookup(checked: CheckedUrl): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, checked.addresses.map((a) => ({ address: a.address, family: a.family })));
    else callback(null, checked.addresses[0].address, checked.addresses[0].family);
  }) as unknown as LookupFunction;
}
