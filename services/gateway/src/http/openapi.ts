/**
 * The OpenAPI 3.1 document of an API, generated from its routes: the request schemas are the zod
 * schemas the pipeline validates with (JSON Schema 2020-12 through zod's own `z.toJSONSchema`), and
 * the error responses list the exact codes each operation can answer. One builder serves every API
 * (`/api/v1/openapi.json`, `/admin/v1/openapi.json`); what differs between them is their description
 * (`DocumentInfo`) and their routes' auth kinds.
 *
 * What a generated client relies on (docs/api-conventions.md, "Description and docs"):
 * - every error status of an operation is its own problem schema: `status` is a constant and `code` an
 *   enum of exactly the codes that operation can answer with that status, both required;
 * - response headers that are not always present (`Idempotent-Replayed`, `Retry-After` of a busy
 *   Idempotency-Key) are inline with `required: false`: openapi-typescript types a `$ref`'d header as
 *   always present, so only headers that always come are `$ref`s;
 * - every request and response has an example, valid against its schema (the routes give the requests'
 *   and the successes'; the errors' are made here from the codes).
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
  /**
   * The server: the API's absolute base URL (`https://reviews.example.com/api/v1`), or its base path
   * alone (`/api/v1`), which a client resolves against the URL it fetched the document from. See `serverUrlFor`.
   */
  serverUrl: string;
  /** Tag name → description; a tag used by routes but missing here gets `defaultTagDescription`. */
  tags?: Record<string, string>;
  defaultTagDescription?: (tag: string) => string;
  /** Every code any request to the API may get, before the routes' own (`x-error-codes`, the Problem enum). */
  errorCatalog: Record<string, ErrorCodeInfo>;
  /** POST operations take an Idempotency-Key (as the pipeline's `idempotencyKeys`). */
  idempotencyKeys: boolean;
  /** The events the API POSTs to its integrators' endpoints (the document's `webhooks`). */
  webhooks?: readonly WebhookDefinition[];
}

/** An event delivered by webhook (Standard Webhooks v1): what a receiver gets. */
export interface WebhookDefinition {
  /** The event type, the key of the document's `webhooks` (e.g. `cascade.recipient.finished`). */
  type: string;
  operationId: string;
  summary: string;
  description: string;
  /** Schema of the JSON body. */
  body: z.ZodType;
  /** A body, valid against `body`. */
  example: unknown;
}

const LOOPBACK_HOSTS = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/**
 * The document's server URL: `PUBLIC_BASE_URL` + the base path when that names a host others can reach,
 * and the base path alone when it is a loopback address (the default when PUBLIC_BASE_URL is unset): an
 * absolute `http://localhost:8080` would be wrong for every caller not on the gateway's own machine,
 * while a relative server resolves against wherever the document was fetched from.
 */
export function serverUrlFor(publicBaseUrl: string, basePath: string): string {
  let host: string;
  try {
    host = new URL(publicBaseUrl).hostname;
  } catch {
    return basePath;
  }
  return LOOPBACK_HOSTS.test(host) ? basePath : `${publicBaseUrl.replace(/\/$/, '')}${basePath}`;
}

const PROBLEM_REF = '#/components/schemas/Problem';
const BODY_ERRORS = ['invalid_request', 'malformed_json', 'payload_too_large', 'unsupported_media_type'] as const;
const IDEMPOTENCY_ERRORS = ['invalid_idempotency_key', 'idempotency_key_reused', 'idempotency_key_in_use'] as const;
/** Where the examples' problem `type`s point when the document has no absolute server. */
const EXAMPLE_BASE_URL = 'https://reviews.example.com';
const EXAMPLE_REQUEST_ID = '0190e0e0-7a2b-7c3d-8e4f-5a6b7c8d9e0f';

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
  if (route.recipients) addError('recipient_quota_exceeded');
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

/** Headers some responses carry and others not: inline, so a generated client types them as optional. */
const IDEMPOTENT_REPLAYED = {
  description: 'Present, with the value `true`, only when the response is a saved one replayed for a repeated Idempotency-Key; absent otherwise.',
  required: false,
  schema: { type: 'string', const: 'true' },
  example: 'true',
};
const RETRY_AFTER_WHEN_BUSY = {
  description: 'With `idempotency_key_in_use` only: seconds to wait before retrying.',
  required: false,
  schema: { type: 'integer', minimum: 1 },
  example: 1,
};

/** A query parameter's example as its JSON type (the route gives it as the string of the URL). */
function typedExample(value: string, schema: Json): unknown {
  const types = ([] as unknown[]).concat(schema.type ?? []);
  if ((types.includes('integer') || types.includes('number')) && value.trim() !== '' && !Number.isNaN(Number(value))) return Number(value);
  if (types.includes('boolean') && (value === 'true' || value === 'false')) return value === 'true';
  return value;
}

/** The example problem of an error response: its first code, with the extension members that code carries. */
function problemExample(route: Route, status: number, code: string, description: string, where: { basePath: string; typeBase: string }): Json {
  let instance = `${where.basePath}${route.path}`;
  for (const [name, value] of Object.entries(route.example?.params ?? {})) instance = instance.replace(`{${name}}`, encodeURIComponent(value));
  const extensions: Json = {};
  if (code === 'invalid_request') {
    const query = Object.keys(route.example?.query ?? {})[0];
    extensions.errors = route.request.body || !query ? [{ pointer: '', detail: 'a JSON body is required' }] : [{ parameter: query, detail: 'Invalid input' }];
  } else if (code === 'invalid_idempotency_key') extensions.errors = [{ header: 'Idempotency-Key', detail: 'must be 1 to 255 printable ASCII characters' }];
  else if (code === 'insufficient_scope' && route.scope) extensions.requiredScope = route.scope;
  else if (code === 'rate_limited') extensions.retryAfterSeconds = 42;
  else if (code === 'idempotency_key_in_use') extensions.retryAfterSeconds = 1;
  return {
    type: `${where.typeBase}/docs#error-${code}`,
    title: STATUS_TITLES[status] ?? 'Error',
    status,
    code,
    detail: description.replace(/`/g, ''),
    instance,
    requestId: EXAMPLE_REQUEST_ID,
    ...extensions,
  };
}

function operation(route: Route, info: DocumentInfo, schemas: Json, where: { basePath: string; typeBase: string }): Json {
  const idempotent = info.idempotencyKeys && route.method === 'POST';
  const parameters: Json[] = [];
  const pathParams = route.segments.filter((s) => s.startsWith('{')).map((s) => s.slice(1, -1));
  const paramSchema = route.request.params ? schemaOf(route.request.params, 'input', schemas) : undefined;
  for (const name of pathParams) {
    const s = ((paramSchema?.properties as Json | undefined)?.[name] as Json | undefined) ?? { type: 'string' };
    // A parameter's example comes from the route's `example`, else from its schema's `examples`.
    const { description, examples, ...rest } = s;
    const example = route.example?.params?.[name] ?? (examples as unknown[] | undefined)?.[0];
    parameters.push({ name, in: 'path', required: true, schema: rest, ...(description ? { description } : {}), ...(example !== undefined ? { example } : {}) });
  }
  if (route.request.query) {
    const q = schemaOf(route.request.query, 'input', schemas);
    const required = new Set((q.required as string[] | undefined) ?? []);
    for (const [name, s] of Object.entries((q.properties as Json | undefined) ?? {})) {
      const { description, examples, ...rest } = s as Json;
      const given = route.example?.query?.[name];
      const example = given !== undefined ? typedExample(given, rest) : (examples as unknown[] | undefined)?.[0];
      parameters.push({
        name, in: 'query', required: required.has(name), schema: rest,
        ...(description ? { description } : {}),
        ...(example !== undefined ? { example } : {}),
      });
    }
  }
  if (idempotent) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });

  const quotaHeaders = { RateLimit: header('RateLimit'), 'RateLimit-Policy': header('RateLimitPolicy') };
  // A rate-limited operation reports its quota on every answer after authentication; one that only
  // counts recipients reports them once they are counted: on its success and on its 429.
  const rateHeaders = route.rateLimited ? quotaHeaders : {};
  const responses: Json = {};
  for (const [status, r] of Object.entries(route.responses)) {
    const headers: Json = { 'X-Request-Id': header('RequestId'), ...rateHeaders, ...(route.recipients ? quotaHeaders : {}) };
    if (idempotent && Number(status) < 300) headers['Idempotent-Replayed'] = IDEMPOTENT_REPLAYED;
    responses[status] = {
      description: r.description,
      headers,
      ...(r.body ? { content: { 'application/json': { schema: schemaOf(r.body, 'output', schemas), ...(r.example !== undefined ? { example: r.example } : {}) } } } : {}),
    };
  }
  for (const [status, codes] of [...errorCodesOf(route, info)].sort((a, b) => a[0] - b[0])) {
    const headers: Json = { 'X-Request-Id': header('RequestId') };
    // Rate limiting runs after authentication: a 401 has no quota to report.
    if (status !== 401) Object.assign(headers, rateHeaders);
    if (status === 429) {
      if (route.recipients) Object.assign(headers, quotaHeaders);
      // `too_many_auth_failures` refuses before any key is known: its 429 has no quota to report.
      if (codes.has('too_many_auth_failures') && (route.rateLimited || route.recipients)) {
        Object.assign(headers, QUOTA_HEADERS_WHEN_COUNTED);
      }
      headers['Retry-After'] = header('RetryAfter');
    } else if (codes.has('idempotency_key_in_use')) headers['Retry-After'] = RETRY_AFTER_WHEN_BUSY;
    const list = [...codes].map(([code, d]) => `- \`${code}\`: ${d}`).join('\n');
    const [firstCode, firstDescription] = [...codes][0];
    responses[String(status)] = {
      description: `${STATUS_TITLES[status] ?? 'Error'}. Codes:\n${list}`,
      headers,
      content: {
        'application/problem+json': {
          schema: {
            allOf: [
              { $ref: PROBLEM_REF },
              { type: 'object', properties: { status: { type: 'integer', const: status }, code: { type: 'string', enum: [...codes.keys()] } }, required: ['status', 'code'] },
            ],
          },
          example: problemExample(route, status, firstCode, firstDescription, where),
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
  const withRetry = info.idempotencyKeys || routes.some((r) => r.rateLimited || r.recipients);
  return {
    type: 'object',
    description: 'RFC 9457 problem details. `code` is stable and machine-readable; `type` is derived from it. Operations may add extension members of their own.',
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
    example: 'crm-deal-1042-won',
  },
};
/** The Standard Webhooks headers of every delivery (docs/webhooks.md, "Verifying signatures"). */
const WEBHOOK_PARAMETERS: Json = {
  WebhookId: {
    name: 'webhook-id', in: 'header', required: true, schema: { type: 'string' }, example: '0190c3c4-0000-7000-8000-000000000003',
    description: 'The event id: the same on every attempt and replay of the event. Deduplicate on it.',
  },
  WebhookTimestamp: {
    name: 'webhook-timestamp', in: 'header', required: true, schema: { type: 'integer' }, example: 1777638601,
    description: 'When this attempt was signed, in seconds since the epoch. Refuse one more than 5 minutes away from your clock.',
  },
  WebhookSignature: {
    name: 'webhook-signature', in: 'header', required: true, schema: { type: 'string', pattern: '^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)*$' },
    example: 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
    description: 'Space-separated `v1,<base64 HMAC-SHA256>` of `<webhook-id>.<webhook-timestamp>.<raw body>` with the endpoint\'s secret; two during a secret rotation. Genuine when any one matches.',
  },
};

/** A webhook event as a receiver implements it: the Standard Webhooks headers, the body, and what its answers mean. */
function webhookOperation(event: WebhookDefinition, schemas: Json): Json {
  return {
    operationId: event.operationId,
    summary: event.summary,
    description: event.description,
    tags: ['webhooks'],
    // The receiver's endpoint, not this API: our API key is not sent; the signature proves the sender.
    security: [],
    parameters: ['WebhookId', 'WebhookTimestamp', 'WebhookSignature'].map((name) => ({ $ref: `#/components/parameters/${name}` })),
    requestBody: { required: true, content: { 'application/json': { schema: schemaOf(event.body, 'output', schemas), example: event.example } } },
    responses: {
      '200': { description: 'Any 2xx, within 15 seconds, acknowledges the delivery; the body is ignored (its first 4 KiB are kept in the delivery log).' },
      '410': { description: 'Gone: the endpoint is disabled (`disabledReason: gone`) and gets no more deliveries. Any other answer, or none, is a failed attempt, retried on the schedule.' },
    },
  };
}

const RATE_LIMIT: Json = {
  description:
    'IETF RateLimit field, one item per policy: `"<plan>";r=<remaining>;t=<seconds to reset>` for the key\'s requests (rate-limited operations), then, on operations that create recipients, `"recipients-minute"` and `"recipients-day"` counted in recipients.',
  required: true,
  schema: { type: 'string', pattern: '^"[a-z-]+";r=\\d+;t=\\d+(, "[a-z-]+";r=\\d+;t=\\d+)*$' },
  example: '"standard";r=599;t=42, "recipients-minute";r=998;t=42, "recipients-day";r=19998;t=86342',
};
const RATE_LIMIT_POLICY: Json = {
  description: 'IETF RateLimit-Policy field, one item per policy: `"<plan>";q=<requests>;w=<window seconds>`, then `"recipients-minute";q=<recipients>;w=60` and `"recipients-day";q=<recipients>;w=86400` on operations that create recipients.',
  required: true,
  schema: { type: 'string', pattern: '^"[a-z-]+";q=\\d+;w=\\d+(, "[a-z-]+";q=\\d+;w=\\d+)*$' },
  example: '"standard";q=600;w=60, "recipients-minute";q=1000;w=60, "recipients-day";q=20000;w=86400',
};

/**
 * The same fields on a 429 that may come before any quota was counted (`too_many_auth_failures`): not
 * always there, so inline and optional, like Retry-After on a 409 that can be a busy key.
 */
const QUOTA_HEADERS_WHEN_COUNTED: Json = {
  RateLimit: { ...RATE_LIMIT, required: false, description: 'The IETF RateLimit field, as on the other answers; absent when the request was refused before its key was known (`too_many_auth_failures`).' },
  'RateLimit-Policy': { ...RATE_LIMIT_POLICY, required: false, description: 'The IETF RateLimit-Policy field, as on the other answers; absent when the request was refused before its key was known (`too_many_auth_failures`).' },
};

/** Headers that are always present on the responses that list them (see the note on `$ref`s at the top). */
const SHARED_HEADERS: Json = {
  RequestId: { description: 'The request id (the caller\'s `X-Request-Id` when it is sane, otherwise generated).', required: true, schema: { type: 'string' }, example: EXAMPLE_REQUEST_ID },
  RateLimit: RATE_LIMIT,
  RateLimitPolicy: RATE_LIMIT_POLICY,
  RetryAfter: { description: 'Seconds to wait before retrying.', required: true, schema: { type: 'integer', minimum: 1 }, example: 42 },
};

export function buildOpenApiDocument(routes: readonly Route[], info: DocumentInfo): Json {
  const schemas: Json = {};
  const paths: Record<string, Json> = {};
  const absolute = /^https?:\/\//i.test(info.serverUrl);
  const where = {
    basePath: new URL(info.serverUrl, 'http://x').pathname.replace(/\/$/, ''),
    typeBase: absolute ? new URL(info.serverUrl).origin : EXAMPLE_BASE_URL,
  };
  const sorted = [...routes].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
  for (const route of sorted) {
    paths[route.path] ??= {};
    paths[route.path][route.method.toLowerCase()] = operation(route, info, schemas, where);
  }
  const tagNames = [...new Set(sorted.flatMap((r) => r.tags))];
  const kinds = [...new Set(sorted.map((r) => r.auth))] as AuthKind[];
  // Every code the API can answer, with its status and meaning: the catalog plus the routes' own.
  const catalog: Record<string, ErrorCodeInfo> = { ...info.errorCatalog };
  for (const r of sorted) for (const [status, codes] of errorCodesOf(r, info)) for (const [code, description] of codes) catalog[code] ??= { status, description };
  const webhooks = Object.fromEntries((info.webhooks ?? []).map((event) => [event.type, { post: webhookOperation(event, schemas) }]));
  const used = JSON.stringify(paths) + JSON.stringify(webhooks);
  const pick = (kind: string, all: Json): Json => Object.fromEntries(Object.entries(all).filter(([name]) => used.includes(`"#/components/${kind}/${name}"`)));
  const parameters = pick('parameters', { ...SHARED_PARAMETERS, ...WEBHOOK_PARAMETERS });
  return {
    openapi: '3.1.0',
    'x-error-codes': catalog,
    info: { title: info.title, version: info.version, description: info.description, license: { name: 'Apache 2.0', identifier: 'Apache-2.0' } },
    servers: [{ url: info.serverUrl, description: absolute ? 'This installation (PUBLIC_BASE_URL).' : 'Relative to the URL this document was fetched from.' }],
    security: kinds.map((kind) => ({ [kind]: [] })),
    tags: tagNames.map((name) => ({ name, description: info.tags?.[name] ?? info.defaultTagDescription?.(name) ?? `Operations on ${name}.` })),
    paths,
    ...(Object.keys(webhooks).length > 0 ? { webhooks } : {}),
    components: {
      securitySchemes: Object.fromEntries(kinds.map((kind) => [kind, AUTH_DESCRIPTIONS[kind].securityScheme])),
      ...(Object.keys(parameters).length > 0 ? { parameters } : {}),
      headers: pick('headers', SHARED_HEADERS),
      schemas: { ...sortedByName(schemas), Problem: problemSchema(Object.keys(catalog), sorted, info), FieldError: FIELD_ERROR },
    },
  };
}

const sortedByName = (o: Json): Json => Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));

/**
 * Builds the document once per distinct set of routes. Run-time route providers return the same route
 * objects until their source changes (the channel catalog), so an unchanged list is the same objects.
 */
export function openApiCache(info: DocumentInfo): (routes: readonly Route[]) => Json {
  let lastRoutes: readonly Route[] = [];
  let last: Json | undefined;
  return (routes) => {
    if (!last || routes.length !== lastRoutes.length || routes.some((r, i) => r !== lastRoutes[i])) {
      last = buildOpenApiDocument(routes, info);
      lastRoutes = [...routes];
    }
    return last;
  };
}
