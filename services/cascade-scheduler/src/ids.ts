import { randomBytes } from 'node:crypto';
import { randomBase62 } from '@rrs/runtime';

/*
 * Batch forms of the runtime's uuidv7() and of review-link tokens: intake makes ~3 000 ids and 500 tokens
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
/** The first characters of a token: the minute it was made. */
const MINUTE_LENGTH = 4;
/** Minutes are counted from 2024-01-01 UTC, modulo 62^4 (about 28 years). */
const MINUTE_EPOCH_MS = Date.UTC(2024, 0, 1);
const MINUTE_MODULUS = 62 ** MINUTE_LENGTH;
const RANDOM_LENGTH = TOKEN_LENGTH - MINUTE_LENGTH;
/** Random bytes drawn per token: enough for RANDOM_LENGTH characters with overwhelming probability. */
const RANDOM_BYTES = 24;

/**
 * `count` review-link tokens made at `now`: 22 base62 characters, the first 4 the minute (base62 of
 * the minutes since 2024-01-01 UTC, modulo 62^4), the other 18 uniformly random (107 bits: guessing
 * one among a billion live links takes ~10^23 tries, and guesses are limited per address).
 *
 * Why the minute: `review_requests.token` is unique, so every new link writes an entry in that index.
 * With uniformly random tokens the entry lands on a random page of an index as large as the whole
 * history (364 MB at 5 million links, larger than shared_buffers), so each insert reads a cold page,
 * dirties it and writes it whole to the WAL after each checkpoint; inserting 100 000 tokens into a
 * 5-million-token index took 5.7–6.0 s random against 3.0–4.1 s minute-first (docs/operations.md
 * "Data lifecycle"). A minute's tokens share a prefix, so they go to a few adjacent pages, as
 * time-ordered UUIDv7 ids do. In the base62 alphabet's byte order (PostgreSQL's C and C.UTF-8
 * collations) later minutes sort after earlier ones; in other collations a minute's tokens still sit
 * together. The minute is no secret: the message carrying the link is sent at about that time.
 * Tokens made before this rule are uniform random and stay valid: a token is only looked up whole.
 */
export function tokenBatch(count: number, now: number = Date.now()): string[] {
  const minute = Buffer.allocUnsafe(MINUTE_LENGTH);
  let minutes = Math.floor((now - MINUTE_EPOCH_MS) / 60_000) % MINUTE_MODULUS;
  if (minutes < 0) minutes += MINUTE_MODULUS;
  for (let at = MINUTE_LENGTH - 1; at >= 0; at--, minutes = Math.floor(minutes / 62)) minute[at] = ALPHABET[minutes % 62];
  const prefix = minute.toString('latin1');
  const random = randomBytes(count * RANDOM_BYTES);
  const text = Buffer.allocUnsafe(RANDOM_LENGTH);
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    let length = 0;
    // Rejection sampling keeps characters uniform: bytes >= 248 are dropped (24 bytes give 18 with
    // overwhelming probability; otherwise the random part is drawn alone).
    for (let at = i * RANDOM_BYTES; at < (i + 1) * RANDOM_BYTES && length < RANDOM_LENGTH; at++) if (random[at] < 248) text[length++] = ALPHABET[random[at] % 62];
    out[i] = prefix + (length === RANDOM_LENGTH ? text.toString('latin1', 0, RANDOM_LENGTH) : randomBase62(RANDOM_LENGTH));
  }
  return out;
}

/** One review-link token made at `now` (tokenBatch). */
export function reviewToken(now: number = Date.now()): string {
  return tokenBatch(1, now)[0];
}
