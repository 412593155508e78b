import type { z } from 'zod';
import { InvalidError, type FieldProblem } from '@rrs/runtime';
import { notFound } from './errors';

const MAX_REPORTED_ERRORS = 100;

export interface RequestSchemas {
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
}

export interface RequestInput {
  params: unknown;
  query: unknown;
  body: unknown;
}

function pointerOf(path: readonly PropertyKey[]): string {
  return path.map((p) => `/${String(p).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

/** zod issues as offending fields: JSON pointers into the body, or query parameter names. */
export function issuesToFieldErrors(issues: readonly z.core.$ZodIssue[], where: 'body' | 'query'): FieldProblem[] {
  const out: FieldProblem[] = [];
  for (const issue of issues) {
    const keys = issue.code === 'unrecognized_keys' ? issue.keys.map((k) => [...issue.path, k]) : [issue.path];
    for (const path of keys) {
      const detail = issue.code === 'unrecognized_keys' ? 'unknown field' : issue.message;
      if (where === 'body') out.push({ pointer: pointerOf(path), detail });
      else out.push({ parameter: path.map(String).join('.'), detail });
    }
  }
  return out;
}

/**
 * Validates a request against its route's schemas: a path parameter that fails names nothing (404
 * `not_found`, naming the path segment); query and body are checked together, so one 400 lists every
 * offending field. `body: undefined` with a body schema means no body was sent.
 */
export function validateRequest(schemas: RequestSchemas, path: string, raw: RequestInput): RequestInput {
  let params = raw.params;
  if (schemas.params) {
    const r = schemas.params.safeParse(raw.params);
    if (!r.success) throw notFound(unknownParamMessage(path, String(r.error.issues[0]?.path[0] ?? '')));
    params = r.data;
  }
  const errors: FieldProblem[] = [];
  let query = raw.query;
  if (schemas.query) {
    const r = schemas.query.safeParse(raw.query);
    if (r.success) query = r.data;
    else errors.push(...issuesToFieldErrors(r.error.issues, 'query'));
  }
  let body: unknown;
  if (schemas.body) {
    if (raw.body === undefined) errors.push({ pointer: '', detail: 'a JSON body is required' });
    else {
      const r = schemas.body.safeParse(raw.body);
      if (r.success) body = r.data;
      else errors.push(...issuesToFieldErrors(r.error.issues, 'body'));
    }
  }
  if (errors.length > 0) throw invalid(errors);
  return { params, query, body };
}

/** `no cascades with this id` for `/cascades/{id}`: the collection the failing parameter names a member of. */
function unknownParamMessage(path: string, param: string): string {
  const segments = path.split('/');
  const at = segments.indexOf(`{${param}}`);
  const collection = at > 0 ? segments[at - 1] : segments[1];
  return `no ${collection.startsWith('{') ? 'object' : collection} with this ${at > 0 ? param : 'id'}`;
}

function invalid(errors: FieldProblem[]): InvalidError {
  const shown = errors.slice(0, MAX_REPORTED_ERRORS);
  const more = errors.length - shown.length;
  const detail = errors.length === 1 ? `${where(errors[0])}: ${errors[0].detail}` : `${errors.length} fields are invalid${more > 0 ? ` (the first ${shown.length} are listed)` : ''}`;
  return new InvalidError(shown, { message: detail });
}

function where(e: FieldProblem): string {
  if (e.pointer !== undefined) return e.pointer === '' ? 'body' : e.pointer;
  if (e.parameter !== undefined) return `query parameter ${e.parameter}`;
  return `header ${e.header}`;
}
