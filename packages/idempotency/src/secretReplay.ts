import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { IdempotencyRequest } from './idempotency';

/**
 * A response that carries a secret shown once (an API key, the token of an invitation link) must give
 * the same secret to a replay of its Idempotency-Key, yet the database must never hold a usable
 * credential. So such a response is saved under the SHA-256 of the Idempotency-Key, and its secret is
 * sealed (AES-256-GCM) under a key derived from the Idempotency-Key itself (HKDF-SHA256, salted with the
 * organization): only a caller who holds the Idempotency-Key opens it, and a copy of the database holds
 * neither. The key must then be as hard to guess as a secret (the console sends a random UUID).
 */
export interface SecretReplay {
  /** The request to run under (`runIdempotent`): the key replaced by its hash; undefined without a key. */
  request: IdempotencyRequest | undefined;
  seal(secret: string): string;
  /** The secret again; throws if the sealed text was not made under this Idempotency-Key. */
  open(sealed: string): string;
}

const VERSION = 'v1';

export function secretReplay(request: IdempotencyRequest | undefined): SecretReplay {
  if (!request) {
    return {
      request: undefined,
      seal: () => '',
      open: () => {
        throw new Error('nothing is sealed without an Idempotency-Key');
      },
    };
  }
  const key = Buffer.from(hkdfSync('sha256', request.key, `rrs idempotency ${request.organizationId}`, 'secret replay', 32));
  return {
    request: { ...request, key: `sha256:${createHash('sha256').update(request.key).digest('base64url')}` },
    seal(secret) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
      return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), sealed.toString('base64url')].join('.');
    },
    open(text) {
      const [version, iv, tag, sealed] = text.split('.');
      if (version !== VERSION || !iv || !tag || sealed === undefined) throw new Error('not a sealed replay secret');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(sealed, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}
