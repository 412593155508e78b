import { randomBytes } from 'node:crypto';
import { randomBase62 } from '@rrs/runtime';

/*
 * Batch forms of the runtime's uuidv7() and randomBase62(22): intake makes ~3 000 ids and 500 tokens
 * per request, and one randomBytes call per id was the largest CPU cost of accepting a cascade.
 */

/** `n` time-ordered UUIDv7 strings for time `now`, from one random buffer. */
export function uuidv7Batch(n: number, now: number): string[] {
  const buf = randomBytes(16 * n);
  const out = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const o = i * 16;
    buf.writeUIntBE(now, o, 6);
    buf[o + 6] = (buf[o + 6] & 0x0f) | 0x70;
    buf[o + 8] = (buf[o + 8] & 0x3f) | 0x80;
    const h = buf.toString('hex', o, o + 16);
    out[i] = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  return out;
}

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `n` tokens of 22 uniform base62 characters (130 bits each), as randomBase62(22). */
export function tokenBatch(n: number): string[] {
  const buf = randomBytes(n * 24);
  const out = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    let s = '';
    // Rejection sampling keeps characters uniform: bytes >= 248 are dropped (24 bytes give 22 with
    // overwhelming probability; otherwise the token is drawn alone).
    for (let o = i * 24; o < i * 24 + 24 && s.length < 22; o++) if (buf[o] < 248) s += ALPHABET[buf[o] % 62];
    out[i] = s.length === 22 ? s : randomBase62(22);
  }
  return out;
}
