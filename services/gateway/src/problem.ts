import type { Request, Response } from 'express';
import { AppError } from '@rrs/runtime';

/**
 * Every error leaves the gateway as RFC 9457 problem details with a stable `code`. The `type` URI is
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

const TITLES: Record<number, string> = {
  400: 'Bad Request', 401: 'Unauthorized', 402: 'Payment Required', 403: 'Forbidden', 404: 'Not Found',
  405: 'Method Not Allowed', 409: 'Conflict', 413: 'Content Too Large', 415: 'Unsupported Media Type',
  429: 'Too Many Requests', 500: 'Internal Server Error', 503: 'Service Unavailable',
};

export function problemOf(err: AppError, req: Request): Problem {
  return {
    type: `https://docs.review-request.dev/errors/${err.code}`,
    title: TITLES[err.status] ?? 'Error',
    status: err.status,
    code: err.code,
    detail: err.message,
    instance: req.originalUrl.split('?')[0],
    requestId: String(res(req).locals.requestId ?? ''),
    ...(err.details ?? {}),
  };
}

function res(req: Request): Response {
  return req.res as Response;
}

export function sendProblem(req: Request, response: Response, err: AppError): void {
  response.status(err.status).type('application/problem+json').send(JSON.stringify(problemOf(err, req)));
}
