/**
 * Checks HTTP responses against an OpenAPI 3.1 document: the status must be documented for the
 * operation, the content type must be one it documents, and the body must be valid against its schema
 * (JSON Schema 2020-12, with ajv). Tests use it on every response they receive, so the document and
 * the behaviour cannot drift apart.
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

  /** Throws OpenApiMismatch when the response is not what the document says `method url` can answer. */
  check(method: string, url: string, res: ResponseSnapshot): void {
    const what = `${method.toUpperCase()} ${url} → ${res.status}`;
    const pathname = new URL(url, 'http://x').pathname;
    const local = pathname.startsWith(this.basePath) ? pathname.slice(this.basePath.length) || '/' : undefined;
    const entry = local === undefined ? undefined : this.paths.find((p) => p.regex.test(local));
    const op = entry ? (((this.doc.paths as Json)[entry.template] as Json)[method.toLowerCase()] as Json | undefined) : undefined;
    if (!entry || !op) {
      // Unknown routes and methods are answered by the gateway itself, always as a Problem.
      const expected = entry ? 405 : 404;
      if (res.status !== expected) throw new OpenApiMismatch(`${what}: no such operation in the document, so ${expected} was expected`);
      this.expectType(what, res.contentType, 'application/problem+json');
      this.validate('/components/schemas/Problem', res.body, what);
      return;
    }
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
      const typed = schema.type === 'integer' || schema.type === 'number' ? Number(value) : value;
      const v = this.ajv.compile(schema);
      if (!v(typed)) throw new OpenApiMismatch(`${what}: header ${name}: ${JSON.stringify(value)} does not match ${JSON.stringify(schema)} (${pointer})`);
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
    this.check(init.method ?? 'GET', url, { status: res.status, contentType, body, headers: res.headers });
    return { status: res.status, headers: res.headers, body };
  }
}

/** A checker for the document at `source` (a URL to fetch, or the document itself). */
export async function openApiChecker(source: string | Json): Promise<OpenApiChecker> {
  if (typeof source !== 'string') return new OpenApiChecker(source);
  const res = await fetch(source);
  if (res.status !== 200) throw new OpenApiMismatch(`GET ${source} answered ${res.status}`);
  return new OpenApiChecker((await res.json()) as Json);
}
