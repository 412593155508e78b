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

/** PostgreSQL's type id of `uuid`: the element type a binary `uuid[]` names. */
const UUID_TYPE_OID = 2950;
/** A binary array's header: dimensions, NULL flag, element type, length, lower bound (4 bytes each). */
const ARRAY_HEADER_BYTES = 20;
/** Each element: its length (4 bytes), then the uuid's 16. */
const ELEMENT_BYTES = 4 + 16;

/**
 * Time-ordered UUIDv7s made together for one time, kept as PostgreSQL's binary form of a
 * one-dimensional `uuid[]` (`bytes`): passed as a parameter (node-postgres sends a Buffer in binary),
 * PostgreSQL takes the ids without parsing text, which cost it ~0.9 µs per id (~2 ms of a
 * 500-recipient start's 2 500 ids). An id is made text only where Node itself uses it (`at`).
 */
export class UuidArray {
  readonly bytes: Buffer;

  constructor(readonly length: number, now: number) {
    // One random buffer laid out as the array; the header, the lengths, the time and the version and
    // variant bits are written over it.
    const bytes = randomBytes(ARRAY_HEADER_BYTES + length * ELEMENT_BYTES);
    bytes.writeInt32BE(1, 0);
    bytes.writeInt32BE(0, 4);
    bytes.writeUInt32BE(UUID_TYPE_OID, 8);
    bytes.writeInt32BE(length, 12);
    bytes.writeInt32BE(1, 16);
    for (let i = 0; i < length; i++) {
      const at = ARRAY_HEADER_BYTES + i * ELEMENT_BYTES;
      bytes.writeInt32BE(16, at);
      bytes.writeUIntBE(now, at + 4, 6);
      bytes[at + 10] = (bytes[at + 10] & 0x0f) | 0x70;
      bytes[at + 12] = (bytes[at + 12] & 0x3f) | 0x80;
    }
    this.bytes = bytes;
  }

  /** The id at `index`, as text. */
  at(index: number): string {
    const start = ARRAY_HEADER_BYTES + index * ELEMENT_BYTES + 4;
    const hex = this.bytes.toString('hex', start, start + 16);
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
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
