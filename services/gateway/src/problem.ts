import type { Request, Response } from 'express';
import { AppError } from '@rrs/runtime';
import { STATUS_TITLES } from './errors';

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

export function problemOf(err: AppError, req: Request, requestId: string): Problem {
  const base = String(req.app.locals.publicBaseUrl ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`);
  return {
    ...(err.details ?? {}),
    type: problemType(err.code, base),
    title: STATUS_TITLES[err.status] ?? 'Error',
    status: err.status,
    code: err.code,
    detail: err.message,
    instance: req.originalUrl.split('?')[0],
    requestId,
  };
}

/** Writes the problem, with the headers its details call for (`Retry-After`, `Allow`). */
export function sendProblem(req: Request, res: Response, err: AppError): void {
  const retryAfter = err.details?.retryAfterSeconds;
  if (typeof retryAfter === 'number') res.setHeader('Retry-After', String(Math.max(1, Math.ceil(retryAfter))));
  const allow = err.details?.allow;
  if (Array.isArray(allow)) res.setHeader('Allow', allow.join(', '));
  const body = JSON.stringify(problemOf(err, req, String(res.locals.requestId ?? '')));
  res.status(err.status).type('application/problem+json').send(body);
}
