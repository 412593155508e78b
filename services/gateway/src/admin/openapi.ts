/**
 * The admin API's OpenAPI 3.1 document, generated from the same zod schemas that validate its requests.
 * Problems use the public API's body shape; the admin API's codes are its own enum.
 */
import { z } from 'zod';
import { STATUS_TITLES } from '../errors';
import type { AdminRoute } from './define';

type Json = Record<string, unknown>;

/** Codes every admin operation can answer, by status. */
export const ADMIN_COMMON_ERRORS: Array<{ status: number; code: string; description: string }> = [
  { status: 401, code: 'missing_admin_token', description: 'No `Authorization: Bearer <ADMIN_TOKEN>` header was sent.' },
  { status: 401, code: 'invalid_admin_token', description: 'The admin token is not the configured one.' },
  { status: 404, code: 'not_found', description: 'The organization or object does not exist (or the admin API is disabled).' },
  { status: 503, code: 'service_unavailable', description: 'A service behind the gateway is unavailable; retry later.' },
];
const BODY_ERRORS = [
  { status: 400, code: 'invalid_request', description: 'The request does not match the schema; `errors` lists each offending field as a JSON pointer.' },
  { status: 400, code: 'malformed_json', description: 'The body is not valid JSON.' },
  { status: 413, code: 'payload_too_large', description: 'The body is larger than 1 MB.' },
  { status: 415, code: 'unsupported_media_type', description: 'A body was sent with a Content-Type other than `application/json`.' },
];
const QUERY_ERRORS = [{ status: 400, code: 'invalid_request', description: 'A query parameter is invalid; `errors` names it.' }];

export function adminErrorsOf(route: AdminRoute): Map<number, Map<string, string>> {
  const out = new Map<number, Map<string, string>>();
  const all = [...ADMIN_COMMON_ERRORS, ...(route.request.body ? BODY_ERRORS : []), ...(route.request.query ? QUERY_ERRORS : []), ...route.errors];
  for (const e of all) {
    if (!out.has(e.status)) out.set(e.status, new Map());
    out.get(e.status)!.set(e.code, e.description);
  }
  return out;
}

function schemaOf(schema: z.ZodType, io: 'input' | 'output'): Json {
  const js = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
  delete js.$schema;
  return js;
}

export function buildAdminOpenApi(routes: readonly AdminRoute[]): Json {
  const paths: Record<string, Json> = {};
  const allCodes = new Set<string>();
  for (const route of routes) {
    const parameters: Json[] = [];
    if (route.request.params) {
      const ps = schemaOf(route.request.params, 'input');
      for (const [name, s] of Object.entries((ps.properties as Json) ?? {})) parameters.push({ name, in: 'path', required: true, schema: s });
    }
    if (route.request.query) {
      const qs = schemaOf(route.request.query, 'input');
      const required = new Set((qs.required as string[] | undefined) ?? []);
      for (const [name, s] of Object.entries((qs.properties as Json) ?? {})) parameters.push({ name, in: 'query', required: required.has(name), schema: s });
    }
    const responses: Json = {
      [String(route.response.status)]: {
        description: route.response.description,
        ...(route.response.body ? { content: { 'application/json': { schema: schemaOf(route.response.body, 'output') } } } : {}),
      },
    };
    for (const [status, codes] of [...adminErrorsOf(route)].sort((a, b) => a[0] - b[0])) {
      for (const c of codes.keys()) allCodes.add(c);
      responses[String(status)] = {
        description: `${STATUS_TITLES[status] ?? 'Error'}. Codes:\n${[...codes].map(([c, d]) => `- \`${c}\`: ${d}`).join('\n')}`,
        content: {
          'application/problem+json': {
            schema: { allOf: [{ $ref: '#/components/schemas/Problem' }, { type: 'object', properties: { status: { const: status }, code: { type: 'string', enum: [...codes.keys()] } } }] },
          },
        },
      };
    }
    paths[route.path] ??= {};
    (paths[route.path] as Json)[route.method.toLowerCase()] = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [route.tag],
      ...(parameters.length ? { parameters } : {}),
      ...(route.request.body
        ? { requestBody: { required: true, content: { 'application/json': { schema: schemaOf(route.request.body, 'input'), ...(route.example !== undefined ? { example: route.example } : {}) } } } }
        : {}),
      responses,
    };
  }
  // The public API's problem body, with the admin API's own codes.
  const problem = {
    type: 'object',
    description: 'RFC 9457 problem details. `code` is stable and machine-readable; `type` is derived from it.',
    properties: {
      type: { type: 'string', format: 'uri' },
      title: { type: 'string' },
      status: { type: 'integer' },
      code: { type: 'string', enum: [...allCodes, 'method_not_allowed', 'internal'].sort() },
      detail: { type: 'string' },
      instance: { type: 'string', description: 'The request path.' },
      requestId: { type: 'string', description: 'Also in the `X-Request-Id` response header.' },
      errors: { type: 'array', items: { $ref: '#/components/schemas/FieldError' }, description: 'With 400 (and a 404 naming a field): the offending fields.' },
      allow: { type: 'array', items: { type: 'string' }, description: 'With 405 `method_not_allowed`: the methods the path has (also in `Allow`).' },
    },
    required: ['type', 'title', 'status', 'code', 'detail', 'instance', 'requestId'],
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Review-Request account admin API',
      version: '1.0.0',
      description: "What the account's web UI calls: organizations, API keys, locations, flows, message templates, channel configuration and the SMS balance. Authorized by the ADMIN_TOKEN as a bearer token. Errors are RFC 9457 `application/problem+json` with a stable `code`, like the public API.",
      license: { name: 'Apache 2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: '/admin/v1' }],
    security: [{ adminToken: [] }],
    tags: [...new Set(routes.map((r) => r.tag))].map((name) => ({ name, description: `Account ${name}.` })),
    paths,
    components: {
      securitySchemes: { adminToken: { type: 'http', scheme: 'bearer', description: 'The ADMIN_TOKEN the gateway was started with.' } },
      schemas: {
        Problem: problem,
        FieldError: {
          type: 'object',
          description: 'One offending part of the request: a JSON pointer into the body, or a query parameter.',
          properties: { pointer: { type: 'string' }, parameter: { type: 'string' }, detail: { type: 'string' } },
          required: ['detail'],
        },
      },
    },
  };
}
