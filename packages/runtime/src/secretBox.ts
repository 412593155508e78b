import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { ConfigError } from './errors';

/*
 * Secrets at rest (CRM credentials, and later webhook signing secrets): AES-256-GCM under one of a set of
 * keys. A sealed value names its key, so keys can be rotated: the first key of the list seals, every key
 * of the list opens, and `reencrypt` moves a value to the first key. A sealed value is
 *   `sb1.<key id>.<base64url(iv ‖ ciphertext ‖ tag)>`
 * with a 12-byte random IV and a 16-byte tag. The key id is derived from the key (the first 8 characters
 * of base64url(SHA-256(key))), so the configuration is just the keys. An optional context (e.g.
 * `connector:<id>:credentials`) is bound as additional authenticated data: a value copied to another row
 * does not open there.
 */

const VERSION = 'sb1';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export type SecretBoxErrorCode = 'malformed' | 'unknown_key' | 'tampered';

export class SecretBoxError extends Error {
  readonly code: SecretBoxErrorCode;
  constructor(code: SecretBoxErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SecretBoxError';
    this.code = code;
  }
}

/** The id a sealed value carries for this key. */
export function secretKeyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 8);
}

/** A new random key, base64, for the keys variable. */
export function generateSecretKey(): string {
  return randomBytes(KEY_BYTES).toString('base64');
}

/**
 * Reads a keys variable: base64 32-byte keys separated by commas (spaces allowed), the first one sealing.
 * Fails with a ConfigError naming `variable` on an empty list, a key of the wrong size or a repeated key.
 */
export function parseSecretKeys(value: string | undefined, variable: string): Buffer[] {
  const parts = (value ?? '').split(',').map((p) => p.trim()).filter((p) => p !== '');
  if (parts.length === 0) throw new ConfigError(variable, `is required: one or more base64 keys of ${KEY_BYTES} bytes, comma-separated, the first one encrypting (make one with: node -e "console.log(require('crypto').randomBytes(32).toString('base64'))")`);
  const seen = new Set<string>();
  return parts.map((part, i) => {
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(part)) throw new ConfigError(variable, `key ${i + 1} is not base64`);
    const key = Buffer.from(part.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length !== KEY_BYTES) throw new ConfigError(variable, `key ${i + 1} is ${key.length} bytes; each key must be ${KEY_BYTES} bytes`);
    const id = secretKeyId(key);
    if (seen.has(id)) throw new ConfigError(variable, `key ${i + 1} is listed twice`);
    seen.add(id);
    return key;
  });
}

export class SecretBox {
  private readonly keys: Map<string, Buffer>;
  /** The id of the key that seals. */
  readonly primaryKeyId: string;

  constructor(keys: Buffer[]) {
    if (keys.length === 0) throw new Error('a secret box needs at least one key');
    for (const k of keys) if (k.length !== KEY_BYTES) throw new Error(`secret box keys are ${KEY_BYTES} bytes`);
    this.keys = new Map(keys.map((k) => [secretKeyId(k), k]));
    this.primaryKeyId = secretKeyId(keys[0]);
  }

  /** The box of a keys variable (see parseSecretKeys). */
  static fromEnv(env: Record<string, string | undefined>, variable: string): SecretBox {
    return new SecretBox(parseSecretKeys(env[variable], variable));
  }

  seal(plaintext: string, context = ''): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.primaryKeyId)!, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const body = Buffer.concat([iv, cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${VERSION}.${this.primaryKeyId}.${body.toString('base64url')}`;
  }

  open(sealed: string, context = ''): string {
    const { keyId, body } = parseSealed(sealed);
    const key = this.keys.get(keyId);
    if (!key) throw new SecretBoxError('unknown_key', `sealed with key ${keyId}, which is not configured`);
    if (body.length < IV_BYTES + TAG_BYTES) throw new SecretBoxError('malformed', 'sealed value too short');
    const decipher = createDecipheriv('aes-256-gcm', key, body.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(body.subarray(IV_BYTES, body.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch (err) {
      throw new SecretBoxError('tampered', 'sealed value does not open: changed, or sealed for another context', { cause: err });
    }
  }

  /** True when the value is sealed with another key than the primary (a rotation left it behind). */
  needsReencrypt(sealed: string): boolean {
    return parseSealed(sealed).keyId !== this.primaryKeyId;
  }

  /** The value sealed with the primary key (unchanged when it already is): the re-encryption step of a key rotation. */
  reencrypt(sealed: string, context = ''): string {
    return this.needsReencrypt(sealed) ? this.seal(this.open(sealed, context), context) : sealed;
  }
}

function parseSealed(sealed: string): { keyId: string; body: Buffer } {
  const m = /^sb1\.([A-Za-z0-9_-]{8})\.([A-Za-z0-9_-]+)$/.exec(sealed);
  if (!m) throw new SecretBoxError('malformed', 'not a sealed value');
  return { keyId: m[1], body: Buffer.from(m[2], 'base64url') };
}
