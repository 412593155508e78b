/**
 * Checks HTTP exchanges against an OpenAPI 3.1 document: the status must be documented for the
 * operation, the content type must be one it documents, and the body must be valid against its schema
 * (JSON Schema 2020-12, with ajv); headers the document requires must be there and match, and a header
 * the document describes somewhere may only appear on the responses it is documented for. With the
 * request (`fetch` passes it), a request the document says is invalid must not succeed: a 2xx to it
 * means the server accepts what the document refuses. Tests use it on every response they receive, so
 * the document and the behaviour cannot drift apart.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { ValidateFunction } from 'ajv';

type Json = Record<string, unknown>;

export class OpenApiMismatch extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OpenApiMismatch';
  }
}

export interface ResponseSnapshot {
  status: number;
  /** When given, headers the document marks `required` must be present and match their schema. */
  headers?: Headers | Record<string, string | undefined>;
  /** The Content-Type header; undefined when the response has no body. */
  contentType?: string | null;
  body: unknown;
}

/** The request a response answered, as far as the document describes it. */
export interface RequestSnapshot {
  /** The parsed JSON body; undefined when none was sent or it was not JSON. */
  body?: unknown;
}

export interface CheckedResponse {
  status: number;
  headers: Headers;
  /** The parsed JSON body, or the text when the response is not JSON, or undefined when empty. */
  body: unknown;
}

const pointerEscape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

interface PathEntry {
  template: string;
  regex: RegExp;
}

export class OpenApiChecker {
  readonly doc: Json;
  private readonly ajv: Ajv2020;
  private readonly basePath: string;
  private readonly paths: PathEntry[];
  private readonly validators = new Map<string, ValidateFunction>();
  /** Every header name (lower case) some response of the document describes. */
  private readonly documentedHeaders: Set<string>;

  constructor(doc: Json) {
    this.doc = doc;
    if (!String(doc.openapi ?? '').startsWith('3.1')) throw new OpenApiMismatch(`not an OpenAPI 3.1 document (openapi: ${String(doc.openapi)})`);
    // The document itself is registered as a schema resource, so `#/components/...` refs resolve.
    // strict:false because an OpenAPI document carries keywords (example, x-*) that are not JSON Schema.
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    addFormats(this.ajv);
    this.ajv.addSchema(doc, 'openapi');
    const server = ((doc.servers as Json[] | undefined)?.[0]?.url as string | undefined) ?? '/';
    this.basePath = new URL(server, 'http://x').pathname.replace(/\/$/, '');
    this.paths = Object.keys((doc.paths as Json) ?? {}).map((template) => ({
      template,
      regex: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+')}/?$`),
    }));
    this.documentedHeaders = new Set();
    for (const item of Object.values((doc.paths as Json) ?? {})) {
      for (const op of Object.values(item as Json)) {
        for (const res of Object.values(((op as Json).responses as Json | undefined) ?? {})) {
          for (const name of Object.keys((this.resolve(res).headers as Json | undefined) ?? {})) this.documentedHeaders.add(name.toLowerCase());
        }
      }
    }
  }

  private validator(pointer: string): ValidateFunction {
    let v = this.validators.get(pointer);
    if (!v) {
      v = this.ajv.compile({ $ref: `openapi#${pointer}` });
      this.validators.set(pointer, v);
    }
    return v;
  }

  private validate(pointer: string, body: unknown, what: string): void {
    const v = this.validator(pointer);
    if (!v(body)) {
      const errs = (v.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message ?? ''}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`).join('; ');
      throw new OpenApiMismatch(`${what}: body does not match the document: ${errs}\nbody: ${JSON.stringify(body).slice(0, 2000)}`);
    }
  }

  /** Throws OpenApiMismatch when the response is not what the document says `method url` can answer (to `req`, when given). */
  check(method: string, url: string, res: ResponseSnapshot, req?: RequestSnapshot): void {
    const what = `${method.toUpperCase()} ${url} → ${res.status}`;
    const pathname = new URL(url, 'http://x').pathname;
    const local = pathname.startsWith(this.basePath) ? pathname.slice(this.basePath.length) || '/' : undefined;
    // A concrete path and a templated one may both match (`/cascades/cancel`, `/cascades/{id}`): the
    // one with this method is the operation, as the gateway's router (and OpenAPI) has it.
    const matches = local === undefined ? [] : this.paths.filter((p) => p.regex.test(local));
    const operationOf = (template: string) => ((this.doc.paths as Json)[template] as Json)[method.toLowerCase()] as Json | undefined;
    const entry = matches.find((p) => operationOf(p.template) !== undefined) ?? matches[0];
    const op = entry ? operationOf(entry.template) : undefined;
    if (!entry || !op) {
      // Unknown routes and methods are answered by the gateway itself, always as a Problem.
      const expected = entry ? 405 : 404;
      if (res.status !== expected) throw new OpenApiMismatch(`${what}: no such operation in the document, so ${expected} was expected`);
      this.expectType(what, res.contentType, 'application/problem+json');
      this.validate('/components/schemas/Problem', res.body, what);
      return;
    }
    if (req && res.status >= 200 && res.status < 300) this.checkAcceptedRequest(what, entry.template, method, op, url, req);
    const responses = (op.responses as Json) ?? {};
    const key = String(res.status) in responses ? String(res.status) : `${String(res.status)[0]}XX` in responses ? `${String(res.status)[0]}XX` : 'default' in responses ? 'default' : undefined;
    if (!key) throw new OpenApiMismatch(`${what}: status not documented for ${op.operationId as string} (documented: ${Object.keys(responses).join(', ')})${res.body ? `\nbody: ${JSON.stringify(res.body).slice(0, 500)}` : ''}`);
    if (res.headers) this.checkHeaders(what, key, (responses[key] as Json).headers as Json | undefined, res.headers, `/paths/${pointerEscape(entry.template)}/${method.toLowerCase()}/responses/${key}/headers`);
    const content = (responses[key] as Json).content as Json | undefined;
    if (!content) {
      if (res.body !== undefined && res.body !== '') throw new OpenApiMismatch(`${what}: documented without a body, but one was sent`);
      return;
    }
    const type = Object.keys(content).find((t) => res.contentType?.toLowerCase().startsWith(t));
    if (!type) throw new OpenApiMismatch(`${what}: content type ${String(res.contentType)} not documented (documented: ${Object.keys(content).join(', ')})`);
    if ((content[type] as Json).schema === undefined) return;
    const pointer = `/paths/${pointerEscape(entry.template)}/${method.toLowerCase()}/responses/${key}/content/${pointerEscape(type)}/schema`;
    this.validate(pointer, res.body, what);
  }

  /** A request the server accepted (2xx) must be one the document allows: its body and its query parameters. */
  private checkAcceptedRequest(what: string, template: string, method: string, op: Json, url: string, req: RequestSnapshot): void {
    const media = ((this.resolve(op.requestBody).content as Json | undefined)?.['application/json'] as Json | undefined) ?? undefined;
    if (media?.schema !== undefined && req.body !== undefined) {
      const v = this.validator(`/paths/${pointerEscape(template)}/${method.toLowerCase()}/requestBody/content/application~1json/schema`);
      if (!v(req.body)) {
        const errs = (v.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message ?? ''}`).join('; ');
        throw new OpenApiMismatch(`${what}: the server accepted a request body the document refuses (${errs})\nrequest: ${JSON.stringify(req.body).slice(0, 2000)}`);
      }
    }
    const query = new URL(url, 'http://x').searchParams;
    const parameters = (op.parameters as Json[] | undefined) ?? [];
    for (const [index, raw] of parameters.entries()) {
      const p = this.resolve(raw);
      if (p.in !== 'query') continue;
      const value = query.get(String(p.name));
      if (value === null) {
        if (p.required === true) throw new OpenApiMismatch(`${what}: the server accepted a request without the required query parameter ${String(p.name)}`);
        continue;
      }
      const schema = this.resolve((p.schema as Json | undefined) ?? {});
      // Through the document, so that a `$ref` in the parameter's schema (a named enum) resolves.
      const at = typeof raw.$ref === 'string' ? `${raw.$ref.slice(1)}/schema` : `/paths/${pointerEscape(template)}/${method.toLowerCase()}/parameters/${index}/schema`;
      if (!this.validator(at)(typedValue(value, schema))) throw new OpenApiMismatch(`${what}: the server accepted query parameter ${String(p.name)}=${JSON.stringify(value)}, which the document refuses`);
    }
  }

  private resolve(node: unknown): Json {
    let n = node as Json;
    for (let i = 0; i < 10 && n && typeof n.$ref === 'string'; i++) {
      n = (n.$ref as string).slice(2).split('/').map((k) => k.replace(/~1/g, '/').replace(/~0/g, '~')).reduce<unknown>((o, k) => (o as Json)?.[k], this.doc) as Json;
    }
    return n ?? {};
  }

  private checkHeaders(what: string, key: string, documented: Json | undefined, got: Headers | Record<string, string | undefined>, pointer: string): void {
    const read = (name: string) => (got instanceof Headers ? got.get(name) ?? undefined : Object.entries(got).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1]);
    for (const [name, raw] of Object.entries(documented ?? {})) {
      const h = this.resolve(raw);
      const value = read(name);
      if (value === undefined) {
        if (h.required === true) throw new OpenApiMismatch(`${what}: required header ${name} missing (response ${key})`);
        continue;
      }
      const schema = h.schema as Json | undefined;
      if (!schema) continue;
      const v = this.ajv.compile(schema);
      if (!v(typedValue(value, schema))) throw new OpenApiMismatch(`${what}: header ${name}: ${JSON.stringify(value)} does not match ${JSON.stringify(schema)} (${pointer})`);
    }
    // A header the document describes elsewhere but not for this response (e.g. `Idempotent-Replayed` on a GET).
    const here = new Set(Object.keys(documented ?? {}).map((n) => n.toLowerCase()));
    const present = got instanceof Headers ? [...got.keys()] : Object.entries(got).filter(([, v]) => v !== undefined).map(([k]) => k);
    for (const name of present.map((n) => n.toLowerCase())) {
      if (this.documentedHeaders.has(name) && !here.has(name)) throw new OpenApiMismatch(`${what}: header ${name} is not documented for response ${key}`);
    }
  }

  private expectType(what: string, got: string | null | undefined, want: string): void {
    if (!got?.toLowerCase().startsWith(want)) throw new OpenApiMismatch(`${what}: content type ${String(got)}, expected ${want}`);
  }

  /** fetch() that checks the response against the document before returning it (body parsed). */
  async fetch(url: string, init: RequestInit = {}): Promise<CheckedResponse> {
    const res = await fetch(url, init);
    const text = await res.text();
    const contentType = res.headers.get('content-type');
    let body: unknown = text === '' ? undefined : text;
    if (text !== '' && contentType && /json/i.test(contentType)) body = JSON.parse(text);
    this.check(init.method ?? 'GET', url, { status: res.status, contentType, body, headers: res.headers }, { body: jsonBodyOf(init) });
    return { status: res.status, headers: res.headers, body };
  }
}

/** A header's or query parameter's text as the JSON type its schema has. */
function typedValue(value: string, schema: Json): unknown {
  const types = ([] as unknown[]).concat(schema.type ?? []);
  if ((types.includes('integer') || types.includes('number')) && value.trim() !== '' && !Number.isNaN(Number(value))) return Number(value);
  if (types.includes('boolean') && (value === 'true' || value === 'false')) return value === 'true';
  return value;
}

/** The JSON body of a fetch() request, when it sent one as a string that parses. */
function jsonBodyOf(init: RequestInit): unknown {
  if (typeof init.body !== 'string') return undefined;
  try {
    return JSON.parse(init.body) as unknown;
  } catch {
    return undefined;
  }
}

/** A checker for the document at `source` (a URL to fetch, or the document itself). */
export async function openApiChecker(source: string | Json): Promise<OpenApiChecker> {
  if (typeof source !== 'string') return new OpenApiChecker(source);
  const res = await fetch(source);
  if (res.status !== 200) throw new OpenApiMismatch(`GET ${source} answered ${res.status}`);
  return new OpenApiChecker((await res.json()) as Json);
}
