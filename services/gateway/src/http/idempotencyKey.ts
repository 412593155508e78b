import { InvalidError } from '@rrs/runtime';

const PRINTABLE = /^[\x20-\x7e]{1,255}$/;

/**
 * Reads the Idempotency-Key header. The IETF draft makes it a structured-field string (`"abc"`), while
 * most clients send it bare (`abc`); both mean the same key. Returns undefined when absent; a value that
 * is not 1–255 printable ASCII characters is a 400 `invalid_idempotency_key`.
 */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (Array.isArray(header)) throw refuse('send one Idempotency-Key header');
  let key = header.trim();
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) {
    const inner = key.slice(1, -1);
    if (/(^|[^\\])"/.test(inner.replace(/\\\\/g, ''))) throw refuse('the quoted Idempotency-Key has an unescaped quote');
    key = inner.replace(/\\(["\\])/g, '$1');
  }
  if (!PRINTABLE.test(key) || key.trim() !== key) throw refuse('the Idempotency-Key must be 1 to 255 printable ASCII characters, without leading or trailing spaces');
  return key;
}

function refuse(detail: string): InvalidError {
  return new InvalidError([{ header: 'Idempotency-Key', detail }], { code: 'invalid_idempotency_key', message: detail });
}
