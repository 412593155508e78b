import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every depth, so equal bodies give equal text whatever their key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as Record<string, unknown>)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** Identifies "the same request": method, route pattern and canonical body. */
export function requestFingerprint(method: string, route: string, body: unknown): string {
  return createHash('sha256').update(`${method.toUpperCase()} ${route}\n${canonicalJson(body)}`).digest('hex');
}
