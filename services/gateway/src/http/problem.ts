import type { Request, Response } from 'express';
import type { DomainError } from '@rrs/runtime';
import { STATUS_TITLES } from './errorCodes';
import { statusOf } from './errors';

/**
 * Every error leaves the gateway as RFC 9457 problem details with a stable `code`. The `type` is
 * derived from the code, so the two never disagree.
 */
export interface Problem {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  instance: string;
  requestId: string;
  [extension: string]: unknown;
}

/**
 * The problem `type`: the code's entry on this server's own docs page (`<PUBLIC_BASE_URL>/docs#error-<code>`),
 * so a self-hosted install never points at a host it does not run.
 */
export function problemType(code: string, publicBaseUrl: string): string {
  return `${publicBaseUrl}/docs#error-${code}`;
}

/** The problem body; extension members (`errors`, `allow`, `requiredScope`, …) come first, the standard members win. */
export function problemBody(status: number, code: string, detail: string, where: { publicBaseUrl: string; instance: string; requestId: string }, extensions: Record<string, unknown> = {}): Problem {
  return {
    ...extensions,
    type: problemType(code, where.publicBaseUrl),
    title: STATUS_TITLES[status] ?? 'Error',
    status,
    code,
    detail,
    instance: where.instance,
    requestId: where.requestId,
  };
}

/** Writes any domain error as problem+json with its status, and the headers its details call for (`Retry-After`, `Allow`). */
export function sendProblem(req: Request, res: Response, err: DomainError): void {
  const status = statusOf(err);
  const retryAfter = err.details?.retryAfterSeconds;
  if (typeof retryAfter === 'number') res.setHeader('Retry-After', String(Math.max(1, Math.ceil(retryAfter))));
  const allow = err.details?.allow;
  if (Array.isArray(allow)) res.setHeader('Allow', allow.join(', '));
  const publicBaseUrl = String(req.app.locals.publicBaseUrl ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`);
  const body = problemBody(status, err.code, err.message, { publicBaseUrl, instance: req.originalUrl.split('?')[0], requestId: String(res.locals.requestId ?? '') }, err.details);
  res.status(status).type('application/problem+json').send(JSON.stringify(body));
}
