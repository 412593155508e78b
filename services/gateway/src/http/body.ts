import express, { type Request, type Response } from 'express';
import { DomainError, InvalidError, type FieldProblem } from '@rrs/runtime';
import { HttpError } from './errors';

/** The largest JSON body any API takes. */
export const BODY_LIMIT_BYTES = 1024 * 1024;
/** The deepest nesting any API's body has is 4; anything past this is refused before a schema or a fingerprint recurses into it. */
export const MAX_JSON_DEPTH = 32;
const JSON_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;

const jsonParser = express.json({ limit: BODY_LIMIT_BYTES, strict: true, type: () => true });

function hasBody(req: Request): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && length !== '0';
}

/**
 * The request's JSON body (an object or array), or undefined when none was sent. Refuses another media
 * type (415), more than 1 MB (413) and what is not JSON (400 `malformed_json`) before anything is parsed
 * further.
 */
export async function readJsonBody(req: Request, res: Response): Promise<unknown> {
  if (!hasBody(req)) return undefined;
  const type = req.headers['content-type'];
  if (!type || !JSON_TYPE.test(type)) {
    throw new HttpError(415, 'unsupported_media_type', 'send the body as `Content-Type: application/json`');
  }
  try {
    await new Promise<void>((resolve, reject) => jsonParser(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
  } catch (err) {
    throw bodyError(err) ?? err;
  }
  checkJsonShape(req.body);
  return req.body;
}

const escapePointer = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** A value met while walking a body: its key (or index) under its parent (the body itself has no parent). */
interface Place {
  value: unknown;
  parent: Place | null;
  key: string | number;
  depth: number;
}

/** The JSON pointer of a place, written only for a place that has a problem (most bodies have none). */
function pointerOf(place: Place): string {
  let pointer = '';
  for (let at: Place | null = place; at?.parent; at = at.parent) pointer = `/${typeof at.key === 'number' ? at.key : escapePointer(at.key)}${pointer}`;
  return pointer;
}

/**
 * Refuses, before any recursive code sees the body, JSON nested deeper than MAX_JSON_DEPTH (400
 * `malformed_json`) and a NUL character in any string or key (400 `invalid_request`, naming each place):
 * no field of the API may hold one, and PostgreSQL text cannot store it. Walks without recursion.
 */
export function checkJsonShape(body: unknown): void {
  const problems: FieldProblem[] = [];
  const pending: Place[] = [{ value: body, parent: null, key: '', depth: 0 }];
  while (pending.length > 0) {
    const place = pending.pop()!;
    const { value, depth } = place;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) problems.push({ pointer: pointerOf(place) || '/', detail: 'must not contain a NUL character' });
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_JSON_DEPTH) throw new DomainError('invalid', 'malformed_json', `the request body nests deeper than ${MAX_JSON_DEPTH} levels`);
    if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index++) pending.push({ value: value[index], parent: place, key: index, depth: depth + 1 });
      continue;
    }
    for (const key of Object.keys(value)) {
      const childPlace: Place = { value: (value as Record<string, unknown>)[key], parent: place, key, depth: depth + 1 };
      if (key.includes('\u0000')) problems.push({ pointer: pointerOf(childPlace), detail: 'a key must not contain a NUL character' });
      pending.push(childPlace);
    }
  }
  if (problems.length > 0) throw new InvalidError(problems.reverse());
}

/** Turns body-parser failures (this reader's, or another parser's such as the review form's) into the API's problem codes. */
export function bodyError(err: unknown): DomainError | undefined {
  const type = (err as { type?: string } | null)?.type;
  switch (type) {
    case 'entity.too.large':
      return new HttpError(413, 'payload_too_large', 'the request body is larger than 1 MB', { cause: err });
    case 'entity.parse.failed':
      return new DomainError('invalid', 'malformed_json', 'the request body is not valid JSON (an object or array is expected)', { cause: err });
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new HttpError(415, 'unsupported_media_type', 'send the body as UTF-8 JSON', { cause: err });
    case 'request.aborted':
    case 'request.size.invalid':
      return new DomainError('invalid', 'malformed_json', 'the request body was incomplete', { cause: err });
    default:
      return undefined;
  }
}
