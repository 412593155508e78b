/**
 * The OpenAPI 3.1 document of an API, generated from its routes: the request schemas are the zod
 * schemas the pipeline validates with (JSON Schema 2020-12 through zod's own `z.toJSONSchema`), and
 * the error responses list the exact codes each operation can answer. One builder serves every API
 * (`/api/v1/openapi.json`, `/admin/v1/openapi.json`); what differs between them is their description
 * (`DocumentInfo`) and their routes' auth kinds.
 */
import { z } from 'zod';
import { AUTH_DESCRIPTIONS, type AuthKind } from './auth';
import { DEFAULT_CODES_BY_STATUS, ERROR_CODES, STATUS_TITLES, type ErrorCodeInfo, type RouteError } from './errorCodes';
import type { Route } from './route';
import { SENDING_ERRORS } from './sending';

type Json = Record<string, unknown>;

export interface DocumentInfo {
  title: string;
  version: string;
  description: string;
  /** Base URL of the API including its base path, e.g. `https://reviews.example.com/api/v1`. */
  serverUrl: string;
  /** Tag name → description; a tag used by routes but missing here gets `defaultTagDescription`. */
  tags?: Record<string, string>;
  defaultTagDescription?: (tag: string) => string;
  /** Every code any request to the API may get, before the routes' own (`x-error-codes`, the Problem enum). */
  errorCatalog: Record<string, ErrorCodeInfo>;
  /** POST operations take an Idempotency-Key (as the pipeline's `idempotencyKeys`). */
  idempotencyKeys: boolean;
}

const PROBLEM_REF = '#/components/schemas/Problem';
const BODY_ERRORS = ['invalid_request', 'malformed_json', 'payload_too_large', 'unsupported_media_type'] as const;
const IDEMPOTENCY_ERRORS = ['invalid_idempotency_key', 'idempotency_key_reused', 'idempotency_key_in_use'] as const;

/**
 * Error codes an operation can answer, by status, in the order the pipeline can refuse: its auth kind's,
 * the body's, the query's, the path parameters', the Idempotency-Key's, the sending rule's, then a
 * service being down and the route's own. The first description given for a code is kept.
 */
export function errorCodesOf(route: Route, info: Pick<DocumentInfo, 'idempotencyKeys'>): Map<number, Map<string, string>> {
  const out = new Map<number, Map<string, string>>();
  const add = (status: number, code: string, description?: string) => {
    if (!out.has(status)) out.set(status, new Map());
    const codes = out.get(status)!;
    if (!codes.has(code)) codes.set(code, description ?? (ERROR_CODES as Record<string, ErrorCodeInfo>)[code]?.description ?? code);
  };
  const addError = (e: RouteError) => {
    if (typeof e === 'number') {
      const codes = DEFAULT_CODES_BY_STATUS[e];
      if (!codes) throw new Error(`route ${route.operationId}: status ${e} has no default codes; name the code`);
      if (codes.length === 0) out.set(e, out.get(e) ?? new Map());
      for (const c of codes) add(e, c);
    } else if (typeof e === 'string') add(ERROR_CODES[e].status, e);
    else add(e.status, e.code, e.description);
  };
  for (const e of AUTH_DESCRIPTIONS[route.auth].errors(route)) addError(e);
  if (route.request.body) for (const c of BODY_ERRORS) addError(c);
  if (route.request.query) addError('invalid_request');
  if (route.segments.some((s) => s.startsWith('{'))) addError('not_found');
  if (info.idempotencyKeys && route.method === 'POST') for (const c of IDEMPOTENCY_ERRORS) addError(c);
  if (route.sends) for (const c of SENDING_ERRORS) addError(c);
  addError('service_unavailable');
  for (const e of route.errors) addError(e);
  for (const [status, codes] of out) if (codes.size === 0) throw new Error(`route ${route.operationId}: status ${status} lists no error code`);
  return out;
}

/** JSON Schema of a zod schema, with `$defs` hoisted into `components.schemas` so `$ref`s resolve in the document. */
function schemaOf(schema: z.ZodType, io: 'input' | 'output', components: Json): Json {
  const js = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
  delete js.$schema;
  const defs = js.$defs as Json | undefined;
  delete js.$defs;
  const rewritten = JSON.parse(JSON.stringify(js).replace(/"#\/\$defs\//g, '"#/components/schemas/')) as Json;
  if (defs) for (const [k, v] of Object.entries(defs)) components[k] = JSON.parse(JSON.stringify(v).replace(/"#\/\$defs\//g, '"#/components/schemas/'));
  return rewritten;
}

const header = (ref: string) => ({ $ref: `#/components/headers/${ref}` });

function operation(route: Route, info: DocumentInfo, schemas: Json): Json {
  const idempotent = info.idempotencyKeys && route.method === 'POST';
  const parameters: Json[] = [];
  const pathParams = route.segments.filter((s) => s.startsWith('{')).map((s) => s.slice(1, -1));
  const paramSchema = route.request.params ? schemaOf(route.request.params, 'input', schemas) : undefined;
  for (const name of pathParams) {
    const s = ((paramSchema?.properties as Json | undefined)?.[name] as Json | undefined) ?? { type: 'string' };
    parameters.push({ name, in: 'path', required: true, schema: s, ...(route.example?.params?.[name] ? { example: route.example.params[name] } : {}) });
  }
  if (route.request.query) {
    const q = schemaOf(route.request.query, 'input', schemas);
    const required = new Set((q.required as string[] | undefined) ?? []);
    for (const [name, s] of Object.entries((q.properties as Json | undefined) ?? {})) {
      const { description, ...rest } = s as Json;
      parameters.push({ name, in: 'query', required: required.has(name), schema: rest, ...(description ? { description } : {}) });
    }
  }
  if (idempotent) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });

  const rateHeaders = route.rateLimited ? { RateLimit: header('RateLimit'), 'RateLimit-Policy': header('RateLimitPolicy') } : {};
  const responses: Json = {};
  for (const [status, r] of Object.entries(route.responses)) {
    const headers: Json = { 'X-Request-Id': header('RequestId'), ...rateHeaders };
    if (idempotent && Number(status) < 300) headers['Idempotent-Replayed'] = header('IdempotentReplayed');
    responses[status] = {
      description: r.description,
      headers,
      ...(r.body ? { content: { 'application/json': { schema: schemaOf(r.body, 'output', schemas) } } } : {}),
    };
  }
  for (const [status, codes] of [...errorCodesOf(route, info)].sort((a, b) => a[0] - b[0])) {
    const headers: Json = { 'X-Request-Id': header('RequestId') };
    // Rate limiting runs after authentication: a 401 has no quota to report.
    if (status !== 401) Object.assign(headers, rateHeaders);
    if (status === 429) headers['Retry-After'] = header('RetryAfter');
    else if (codes.has('idempotency_key_in_use')) headers['Retry-After'] = header('RetryAfterWhenBusy');
    const list = [...codes].map(([code, d]) => `- \`${code}\`: ${d}`).join('\n');
    responses[String(status)] = {
      description: `${STATUS_TITLES[status] ?? 'Error'}. Codes:\n${list}`,
      headers,
      content: {
        'application/problem+json': {
          schema: { allOf: [{ $ref: PROBLEM_REF }, { type: 'object', properties: { status: { const: status }, code: { type: 'string', enum: [...codes.keys()] } } }] },
        },
      },
    };
  }

  const op: Json = {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: route.tags,
    ...AUTH_DESCRIPTIONS[route.auth].operation(route),
    ...(parameters.length > 0 ? { parameters } : {}),
  };
  if (route.request.body) {
    op.requestBody = {
      required: true,
      content: { 'application/json': { schema: schemaOf(route.request.body, 'input', schemas), ...(route.example?.body !== undefined ? { example: route.example.body } : {}) } },
    };
  }
  op.responses = responses;
  return op;
}

const FIELD_ERROR = {
  type: 'object',
  description: 'One offending part of the request: a JSON pointer into the body, a query parameter or a header.',
  properties: {
    pointer: { type: 'string', description: 'RFC 6901 JSON pointer into the body, e.g. `/recipients/3/email`; `` is the whole body.' },
    parameter: { type: 'string', description: 'Name of an offending query parameter.' },
    header: { type: 'string', description: 'Name of an offending header.' },
    detail: { type: 'string' },
  },
  required: ['detail'],
};

/** The problem body; extension members that no operation of the document can carry are left out. */
function problemSchema(codes: readonly string[], routes: readonly Route[], info: DocumentInfo): Json {
  const withScopes = routes.some((r) => r.scope);
  const withRetry = info.idempotencyKeys || routes.some((r) => r.rateLimited);
  return {
    type: 'object',
    description: 'RFC 9457 problem details. `code` is stable and machine-readable; `type` is derived from it.',
    properties: {
      type: { type: 'string', format: 'uri', description: 'Where the code is explained: `<base URL>/docs#error-<code>` on this server.' },
      title: { type: 'string' },
      status: { type: 'integer' },
      code: { type: 'string', enum: codes },
      detail: { type: 'string' },
      instance: { type: 'string', description: 'The request path.' },
      requestId: { type: 'string', description: 'Also in the `X-Request-Id` response header; quote it when reporting a problem.' },
      errors: { type: 'array', items: { $ref: '#/components/schemas/FieldError' }, description: 'With 400: every offending field.' },
      ...(withScopes ? { requiredScope: { type: 'string', description: 'With 403 `insufficient_scope`: the scope the key lacks.' } } : {}),
      ...(withRetry ? { retryAfterSeconds: { type: 'integer', description: 'With 429 and 409 `idempotency_key_in_use`: same as `Retry-After`.' } } : {}),
      allow: { type: 'array', items: { type: 'string' }, description: 'With 405: the methods the route has.' },
    },
    required: ['type', 'title', 'status', 'code', 'detail', 'instance', 'requestId'],
  };
}

/** Shared parameters and headers; only those some operation uses are emitted (unused components are lint errors). */
const SHARED_PARAMETERS: Json = {
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description:
      'Makes a retry safe: a repeat with the same key and body returns the saved response with `Idempotent-Replayed: true` and creates or sends nothing; the same key with another body gives 409 `idempotency_key_reused`. 1–255 printable ASCII characters, quoted (`"abc"`) or not. Kept 24 h per organization.',
    schema: { type: 'string', minLength: 1, maxLength: 257 },
  },
};
const SHARED_HEADERS: Json = {
  RequestId: { description: 'The request id (the caller\'s `X-Request-Id` when it is sane, otherwise generated).', required: true, schema: { type: 'string' } },
  RateLimit: { description: 'IETF RateLimit field: `"<plan>";r=<remaining>;t=<seconds to reset>`.', required: true, schema: { type: 'string', pattern: '^"[a-z]+";r=\\d+;t=\\d+$' } },
  RateLimitPolicy: { description: 'IETF RateLimit-Policy field: `"<plan>";q=<quota>;w=<window seconds>`.', required: true, schema: { type: 'string', pattern: '^"[a-z]+";q=\\d+;w=\\d+$' } },
  RetryAfter: { description: 'Seconds to wait before retrying.', required: true, schema: { type: 'integer', minimum: 1 } },
  RetryAfterWhenBusy: { description: 'With `idempotency_key_in_use`: seconds to wait before retrying.', schema: { type: 'integer', minimum: 1 } },
  IdempotentReplayed: { description: '`true` when the response is a saved one, replayed for a repeated Idempotency-Key.', schema: { type: 'string', enum: ['true'] } },
};

export function buildOpenApiDocument(routes: readonly Route[], info: DocumentInfo): Json {
  const schemas: Json = {};
  const paths: Record<string, Json> = {};
  const sorted = [...routes].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
  for (const route of sorted) {
    paths[route.path] ??= {};
    paths[route.path][route.method.toLowerCase()] = operation(route, info, schemas);
  }
  const tagNames = [...new Set(sorted.flatMap((r) => r.tags))];
  const kinds = [...new Set(sorted.map((r) => r.auth))] as AuthKind[];
  // Every code the API can answer, with its status and meaning: the catalog plus the routes' own.
  const catalog: Record<string, ErrorCodeInfo> = { ...info.errorCatalog };
  for (const r of sorted) for (const [status, codes] of errorCodesOf(r, info)) for (const [code, description] of codes) catalog[code] ??= { status, description };
  const used = JSON.stringify(paths);
  const pick = (kind: string, all: Json): Json => Object.fromEntries(Object.entries(all).filter(([name]) => used.includes(`"#/components/${kind}/${name}"`)));
  const parameters = pick('parameters', SHARED_PARAMETERS);
  return {
    openapi: '3.1.0',
    'x-error-codes': catalog,
    info: { title: info.title, version: info.version, description: info.description, license: { name: 'Apache 2.0', identifier: 'Apache-2.0' } },
    servers: [{ url: info.serverUrl }],
    security: kinds.map((kind) => ({ [kind]: [] })),
    tags: tagNames.map((name) => ({ name, description: info.tags?.[name] ?? info.defaultTagDescription?.(name) ?? `Operations on ${name}.` })),
    paths,
    components: {
      securitySchemes: Object.fromEntries(kinds.map((kind) => [kind, AUTH_DESCRIPTIONS[kind].securityScheme])),
      ...(Object.keys(parameters).length > 0 ? { parameters } : {}),
      headers: pick('headers', SHARED_HEADERS),
      schemas: { ...schemas, Problem: problemSchema(Object.keys(catalog), sorted, info), FieldError: FIELD_ERROR },
    },
  };
}

/** Builds the document once per distinct set of routes (the set changes when channels come and go). */
export function openApiCache(info: DocumentInfo): (routes: readonly Route[]) => Json {
  let lastKey = '';
  let last: Json | undefined;
  return (routes) => {
    const key = routes.map((r) => `${r.method} ${r.path} ${r.operationId}`).join('\n');
    if (!last || key !== lastKey) {
      last = buildOpenApiDocument(routes, info);
      lastKey = key;
    }
    return last;
  };
}
