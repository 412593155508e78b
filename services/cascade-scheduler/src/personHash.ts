import { createHmac } from 'node:crypto';

/** Marks a ledger entry that holds a keyed hash of an address instead of the address. */
export const ADDRESS_HASH_PREFIX = 'hmac1:';

/**
 * The keyed hash (HMAC-SHA-256, key from PERSON_HASH_KEY) of a normalized address (lower-case email,
 * E.164 phone): what the opt-out ledger keeps of a person once their data was erased or retained past
 * its time (docs/customer-respect.md, "Data lifecycle"). Without the key the hash cannot be reversed by
 * trying addresses; with it, the ledger can still answer "is this address opted out?".
 */
export class AddressHasher {
  /** Recent hashes (the dispatcher checks a recipient's addresses at each of its steps), at most CACHE_SIZE. */
  private readonly recent = new Map<string, string>();

  constructor(private readonly key: string) {
    if (key.length < 16) throw new Error('the person hash key must be at least 16 characters');
  }

  hash(address: string): string {
    const cached = this.recent.get(address);
    if (cached !== undefined) return cached;
    const hash = ADDRESS_HASH_PREFIX + createHmac('sha256', this.key).update(address).digest('base64url');
    if (this.recent.size >= CACHE_SIZE) this.recent.delete(this.recent.keys().next().value as string);
    this.recent.set(address, hash);
    return hash;
  }
}

const CACHE_SIZE = 20_000;

/** The key of development and tests; a production start with it is warned about (startScheduler). */
export const DEVELOPMENT_PERSON_HASH_KEY = 'development-person-hash-key';
