import type { Request } from 'express';
import { HttpError } from './errors';

/**
 * DNS rebinding: a page on an attacker's domain whose name later resolves to this server's address
 * (127.0.0.1 on a laptop running the all-in-one, a private address in a network) makes the browser send
 * its requests here as same-origin ones, with `Host: <the attacker's name>`; they would reach the dev
 * inbox and the sign-in. So only the host of PUBLIC_BASE_URL and the loopback names are served: any
 * other `Host` is 421 `misdirected_request` before routing (RFC 9110 §15.5.20), whatever the path.
 * The probes (`/healthz`, `/readyz`) are answered before this, since the kubelet calls them by pod
 * address. Behind a proxy trusted through TRUST_PROXY, `X-Forwarded-Host` is the host (express `req.hostname`).
 * Answers the refusal of a request, undefined when its host is served.
 */
export function hostGuard(publicBaseUrl: string): (req: Request) => HttpError | undefined {
  const publicHost = new URL(publicBaseUrl).hostname.toLowerCase();
  const allowed = (host: string) => host === publicHost || isLoopbackName(host);
  // The verdict on the last Host header seen without X-Forwarded-Host: a server is called by one or two
  // names, so nearly every request is answered by one comparison instead of express's `req.hostname`
  // (its settings lookups and substrings were ~1 % of the gateway's samples in the bench's CPU profile).
  let lastHeader: string | undefined;
  let lastAllowed = false;
  return (req) => {
    const header = req.headers.host;
    // Without X-Forwarded-Host, express's `req.hostname` is the Host header up to its port, whatever TRUST_PROXY says.
    if (req.headers['x-forwarded-host'] === undefined && header !== undefined) {
      if (header !== lastHeader) {
        lastAllowed = allowed(hostnameOf(header).toLowerCase());
        lastHeader = header;
      }
      if (lastAllowed) return undefined;
    } else if (allowed((req.hostname ?? '').toLowerCase())) return undefined;
    const host = (req.hostname ?? '').toLowerCase();
    return new HttpError(421, 'misdirected_request', `this server answers for ${publicHost} (PUBLIC_BASE_URL) and loopback names only, not for the Host ${JSON.stringify(host)}`);
  };
}

/** The host of a Host header without its port, as express's `req.hostname` takes it (an IPv6 literal keeps its brackets). */
function hostnameOf(header: string): string {
  const offset = header[0] === '[' ? header.indexOf(']') + 1 : 0;
  const index = header.indexOf(':', offset);
  return index !== -1 ? header.substring(0, index) : header;
}

/** `localhost` (and its subdomains, RFC 6761 §6.3), 127.0.0.0/8 and `[::1]`: names that cannot be rebound. */
export function isLoopbackName(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(host) || host === '[::1]' || host === '::1';
}
