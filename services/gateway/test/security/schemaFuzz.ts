/*
 * A small schema-driven request generator for the security suite: from an OpenAPI 3.1 document it makes
 * requests for every operation — values that follow the schema, and values that break it one way at a
 * time (wrong type, out of range, missing required, unknown member, hostile strings, odd path segments,
 * bad auth). Deterministic: everything is drawn from one seeded PRNG.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Schema = { [key: string]: any };

/** mulberry32: small, fast, seedable; enough for test-case generation. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Strings an attacker tries first: injection, traversal, template and replacement patterns, odd Unicode. */
export const HOSTILE_STRINGS = [
  '',
  ' ',
  "' OR '1'='1",
  '"; DROP TABLE contacts; --',
  '../../../../etc/passwd',
  '%2e%2e%2f%2e%2e%2f',
  '<script>alert(1)</script>',
  '{{name}}{{link}}',
  "$' $` $& $1",
  '${process.env.DATABASE_URL}',
  '\u202eevil\u202d',
  '\ud83d\ude00'.repeat(40),
  'a'.repeat(5000),
  '\u0000',
  '\ufeff\u200b',
  'https://169.254.169.254/latest/meta-data',
  'http://127.0.0.1:22/',
  'rrs_' + 'A'.repeat(36),
  '+881631234567',
  '+449098790000',
  '-1',
  '1e309',
  'NaN',
  'null',
  '[]',
  '{}',
  'true',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '2026-13-45T25:61:61Z',
];

const HOSTILE_NUMBERS = [0, -1, 1, -0, 0.5, 2 ** 31, -(2 ** 31), 2 ** 53, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2];

export class Generator {
  private readonly random: () => number;

  /**
   * `hints`: values to use for members of these names most of the time (ids of real objects, a phone),
   * so that valid requests get past the lookups and reach the code that acts.
   */
  constructor(private readonly document: Schema, seed: number, private readonly hints: Record<string, readonly string[]> = {}) {
    this.random = prng(seed);
  }

  chance(p: number): boolean {
    return this.random() < p;
  }

  int(min: number, max: number): number {
    return min + Math.floor(this.random() * (max - min + 1));
  }

  pick<T>(list: readonly T[]): T {
    return list[Math.floor(this.random() * list.length)];
  }

  uuid(): string {
    const hex = () => this.int(0, 15).toString(16);
    const part = (n: number) => Array.from({ length: n }, hex).join('');
    return `${part(8)}-${part(4)}-7${part(3)}-8${part(3)}-${part(12)}`;
  }

  resolve(schema: Schema | undefined): Schema {
    let s = schema ?? {};
    for (let i = 0; i < 20 && typeof s.$ref === 'string'; i++) {
      s = s.$ref
        .replace(/^#\//, '')
        .split('/')
        .reduce((node: Schema, key: string) => node?.[key.replace(/~1/g, '/').replace(/~0/g, '~')], this.document);
    }
    return s ?? {};
  }

  /** A value that follows the schema (as far as this generator reads schemas). */
  valid(input: Schema | undefined, depth = 0): Json {
    const schema = this.resolve(input);
    if (schema.const !== undefined) return schema.const;
    if (Array.isArray(schema.enum)) return this.pick(schema.enum);
    if (Array.isArray(schema.examples) && schema.examples.length > 0 && this.chance(0.5)) return this.pick(schema.examples);
    const choices = schema.oneOf ?? schema.anyOf;
    if (Array.isArray(choices)) return this.valid(this.pick(choices), depth + 1);
    if (Array.isArray(schema.allOf)) {
      const merged: Record<string, Json> = {};
      for (const part of schema.allOf) Object.assign(merged, this.valid(part, depth + 1) as object);
      return merged;
    }
    const types: string[] = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : schema.properties ? ['object'] : ['string'];
    const type = this.pick(types.filter((t) => t !== 'null').length ? types.filter((t) => t !== 'null') : types);
    switch (type) {
      case 'null':
        return null;
      case 'boolean':
        return this.chance(0.5);
      case 'integer':
      case 'number': {
        const min = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 0);
        const max = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : min + 100);
        return this.int(Math.ceil(min), Math.floor(Math.max(min, Math.min(max, min + 1000))));
      }
      case 'array': {
        if (depth > 6) return [];
        const min = schema.minItems ?? 0;
        const max = Math.min(schema.maxItems ?? 3, min + 3);
        return Array.from({ length: this.int(min, max) }, () => this.valid(schema.items, depth + 1));
      }
      case 'object': {
        const out: Record<string, Json> = {};
        if (depth > 6) return out;
        const required = new Set<string>(schema.required ?? []);
        for (const [key, property] of Object.entries<Schema>(schema.properties ?? {})) {
          if (!required.has(key) && !this.chance(0.6)) continue;
          out[key] = this.hints[key] && this.chance(0.8) ? this.pick(this.hints[key]) : this.valid(property, depth + 1);
        }
        return out;
      }
      default:
        return this.string(schema);
    }
  }

  private string(schema: Schema): string {
    switch (schema.format) {
      case 'uuid':
        return this.uuid();
      case 'date-time':
        return new Date(Date.UTC(2026, this.int(0, 11), this.int(1, 28), this.int(0, 23))).toISOString();
      case 'email':
        return `fuzz${this.int(0, 9999)}@example.com`;
      case 'uri':
        return `https://example.com/${this.int(0, 9999)}`;
    }
    if (/email/i.test(schema.description ?? '')) return `fuzz${this.int(0, 9999)}@example.com`;
    const min = schema.minLength ?? 1;
    const max = Math.min(schema.maxLength ?? 24, min + 24);
    const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.';
    return Array.from({ length: this.int(min, Math.max(min, max)) }, () => alphabet[this.int(0, alphabet.length - 1)]).join('');
  }

  /** Any JSON value, with the hostile ones often. */
  hostile(depth = 0): Json {
    switch (this.int(0, 7)) {
      case 0:
        return this.pick(HOSTILE_STRINGS);
      case 1:
        return this.pick(HOSTILE_NUMBERS);
      case 2:
        return this.chance(0.5);
      case 3:
        return null;
      case 4:
        return depth > 3 ? [] : Array.from({ length: this.int(0, 4) }, () => this.hostile(depth + 1));
      case 5:
        return depth > 3 ? {} : { [this.pick(['__proto__', 'constructor', 'x', 'organizationId', 'id', ''])]: this.hostile(depth + 1) };
      case 6:
        return this.pick(HOSTILE_STRINGS).repeat(this.int(1, 3));
      default:
        return this.uuid();
    }
  }

  /** The schema's value with one thing broken: a member replaced, dropped or added, or the whole value. */
  broken(schema: Schema | undefined): Json {
    const value = this.valid(schema);
    const resolved = this.resolve(schema);
    if (value === null || typeof value !== 'object' || Array.isArray(value) || this.chance(0.1)) return this.hostile();
    const keys = Object.keys(value);
    const move = this.int(0, 3);
    if (move === 0 && keys.length > 0) value[this.pick(keys)] = this.hostile();
    else if (move === 1 && (resolved.required ?? []).length > 0) delete value[this.pick(resolved.required as string[])];
    else if (move === 2) value[this.pick(['extra', 'organizationId', 'secret', 'isAdmin', '__proto__'])] = this.hostile();
    else if (keys.length > 0) {
      // One level deeper: a nested member broken.
      const key = this.pick(keys);
      const inner = value[key];
      if (inner && typeof inner === 'object' && !Array.isArray(inner) && Object.keys(inner).length > 0) inner[this.pick(Object.keys(inner))] = this.hostile();
      else if (Array.isArray(inner) && inner.length > 0) inner[this.int(0, inner.length - 1)] = this.hostile();
      else value[key] = this.hostile();
    }
    return value;
  }

  /** A path segment: a real-looking id, a random one, or something that is not an id at all. */
  pathSegment(known: readonly string[]): string {
    const roll = this.int(0, 5);
    if (roll <= 1 && known.length > 0) return this.pick(known);
    if (roll === 2) return this.uuid();
    return encodeURIComponent(String(this.pick(HOSTILE_STRINGS)).slice(0, 300)) || 'x';
  }
}
