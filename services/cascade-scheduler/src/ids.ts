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

/** ASCII codes of the hex digits. */
const HEX = Buffer.from('0123456789abcdef', 'latin1');
const DASH = 0x2d;

/**
 * `count` time-ordered UUIDv7 strings for time `now`, from one random buffer. Written as ASCII into one
 * buffer, each id read out as one flat string: hex-then-slice-then-join made six strings per id.
 */
export function uuidv7Batch(count: number, now: number): string[] {
  const random = randomBytes(16 * count);
  const text = Buffer.allocUnsafe(36 * count);
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    const offset = i * 16;
    random.writeUIntBE(now, offset, 6);
    random[offset + 6] = (random[offset + 6] & 0x0f) | 0x70;
    random[offset + 8] = (random[offset + 8] & 0x3f) | 0x80;
    let at = i * 36;
    for (let k = 0; k < 16; k++) {
      if (k === 4 || k === 6 || k === 8 || k === 10) text[at++] = DASH;
      const byte = random[offset + k];
      text[at++] = HEX[byte >> 4];
      text[at++] = HEX[byte & 0x0f];
    }
    out[i] = text.toString('latin1', i * 36, at);
  }
  return out;
}

const ALPHABET = Buffer.from('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', 'latin1');
const TOKEN_LENGTH = 22;

/** `count` tokens of 22 uniform base62 characters (130 bits each), as randomBase62(22). */
export function tokenBatch(count: number): string[] {
  const random = randomBytes(count * 24);
  const text = Buffer.allocUnsafe(TOKEN_LENGTH);
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    let length = 0;
    // Rejection sampling keeps characters uniform: bytes >= 248 are dropped (24 bytes give 22 with
    // overwhelming probability; otherwise the token is drawn alone).
    for (let at = i * 24; at < i * 24 + 24 && length < TOKEN_LENGTH; at++) if (random[at] < 248) text[length++] = ALPHABET[random[at] % 62];
    out[i] = length === TOKEN_LENGTH ? text.toString('latin1', 0, TOKEN_LENGTH) : randomBase62(TOKEN_LENGTH);
  }
  return out;
}
