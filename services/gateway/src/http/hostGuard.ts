import type { NextFunction, Request, Response } from 'express';
import { HttpError } from './errors';

/**
 * DNS rebinding: a page on an attacker's domain whose name later resolves to this server's address
 * (127.0.0.1 on a laptop running the all-in-one, a private address in a network) makes the browser send
 * its requests here as same-origin ones, with `Host: <the attacker's name>`; they would reach the dev
 * inbox and the sign-in. So only the host of PUBLIC_BASE_URL and the loopback names are served: any
 * other `Host` is 421 `misdirected_request` before routing (RFC 9110 §15.5.20), whatever the path.
 * The probes (`/healthz`, `/readyz`) are answered before this, since the kubelet calls them by pod
 * address. Behind a proxy trusted through TRUST_PROXY, `X-Forwarded-Host` is the host (express `req.hostname`).
 */
export function hostGuard(publicBaseUrl: string): (req: Request, res: Response, next: NextFunction) => void {
  const publicHost = new URL(publicBaseUrl).hostname.toLowerCase();
  return (req, _res, next) => {
    const host = (req.hostname ?? '').toLowerCase();
    if (host === publicHost || isLoopbackName(host)) return next();
    next(new HttpError(421, 'misdirected_request', `this server answers for ${publicHost} (PUBLIC_BASE_URL) and loopback names only, not for the Host ${JSON.stringify(host)}`));
  };
}

/** `localhost` (and its subdomains, RFC 6761 §6.3), 127.0.0.0/8 and `[::1]`: names that cannot be rebound. */
export function isLoopbackName(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(host) || host === '[::1]' || host === '::1';
}
