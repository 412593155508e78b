import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { randomBase62 } from '@rrs/runtime';

/**
 * Key format: `rrs_` + 30 random base62 characters (178 bits) + 6 base62 characters of CRC-32 over the
 * rest. The prefix makes leaked keys easy to scan for; the checksum lets a malformed or mistyped key
 * be refused without a database lookup.
 */
export const KEY_PREFIX = 'rrs_';
const BODY_LENGTH = 30;
const KEY_PATTERN = /^rrs_[0-9A-Za-z]{36}$/;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

const CHECKSUM_LENGTH = 6;

function checksum(text: string): string {
  let remaining = crc32(Buffer.from(text));
  let digits = '';
  for (let position = 0; position < CHECKSUM_LENGTH; position++) {
    digits = ALPHABET[remaining % 62] + digits;
    remaining = Math.floor(remaining / 62);
  }
  return digits;
}

export function generateApiKey(): string {
  const head = KEY_PREFIX + randomBase62(BODY_LENGTH);
  return head + checksum(head);
}

export function isWellFormedApiKey(key: string): boolean {
  if (!KEY_PATTERN.test(key)) return false;
  return checksum(key.slice(0, -CHECKSUM_LENGTH)) === key.slice(-CHECKSUM_LENGTH);
}

export function hashApiKey(key: string): Buffer {
  // Keys carry 178 random bits, so a fast hash is enough: there is nothing to brute-force.
  return createHash('sha256').update(key).digest();
}

export function displayParts(key: string): { prefix: string; last4: string } {
  return { prefix: key.slice(0, KEY_PREFIX.length + 4), last4: key.slice(-4) };
}
