import { randomBytes } from 'node:crypto';
import { randomBase62 } from '@rrs/runtime';

/*
 * Batch forms of the runtime's uuidv7() and randomBase62(22): intake makes ~3 000 ids and 500 tokens
 * per request, and one randomBytes call per id was the largest CPU cost of accepting a cascade.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids are looked up only when they can be ids: anything else is simply not found. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** `count` time-ordered UUIDv7 strings for time `now`, from one random buffer. */
export function uuidv7Batch(count: number, now: number): string[] {
  const buf = randomBytes(16 * count);
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    const offset = i * 16;
    buf.writeUIntBE(now, offset, 6);
    buf[offset + 6] = (buf[offset + 6] & 0x0f) | 0x70;
    buf[offset + 8] = (buf[offset + 8] & 0x3f) | 0x80;
    const hex = buf.toString('hex', offset, offset + 16);
    out[i] = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
  return out;
}

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `count` tokens of 22 uniform base62 characters (130 bits each), as randomBase62(22). */
export function tokenBatch(count: number): string[] {
  const buf = randomBytes(count * 24);
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    let token = '';
    // Rejection sampling keeps characters uniform: bytes >= 248 are dropped (24 bytes give 22 with
    // overwhelming probability; otherwise the token is drawn alone).
    for (let at = i * 24; at < i * 24 + 24 && token.length < 22; at++) if (buf[at] < 248) token += ALPHABET[buf[at] % 62];
    out[i] = token.length === 22 ? token : randomBase62(22);
  }
  return out;
}
