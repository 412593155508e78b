import { randomBytes } from 'node:crypto';
import { ConfigError, generateSecretKey, parseSecretKeys, SecretBox, SecretBoxError, secretKeyId } from '../src';

const key = () => randomBytes(32);

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof SecretBoxError ? err.code : `not a SecretBoxError: ${String(err)}`;
  }
  return undefined;
}

describe('SecretBox', () => {
  it('opens what it sealed, and the sealed text names the key and hides the plaintext', () => {
    const k = key();
    const box = new SecretBox([k]);
    const sealed = box.seal('refresh-token-123', 'connector:1');
    expect(sealed).toMatch(new RegExp(`^sb1\\.${secretKeyId(k).replace(/[-]/g, '\\-')}\\.[A-Za-z0-9_-]+$`));
    expect(sealed).not.toContain('refresh-token-123');
    expect(Buffer.from(sealed.split('.')[2], 'base64url').toString('latin1')).not.toContain('refresh-token');
    expect(box.open(sealed, 'connector:1')).toBe('refresh-token-123');
  });

  it('seals the same plaintext differently each time (random IV)', () => {
    const box = new SecretBox([key()]);
    expect(box.seal('x')).not.toBe(box.seal('x'));
  });

  it('refuses a value sealed for another context, a changed value, an unknown key and garbage', () => {
    const box = new SecretBox([key()]);
    const sealed = box.seal('secret', 'connector:1');
    expect(codeOf(() => box.open(sealed, 'connector:2'))).toBe('tampered');
    const body = Buffer.from(sealed.split('.')[2], 'base64url');
    body[body.length - 20] ^= 1;
    expect(codeOf(() => box.open(`${sealed.split('.').slice(0, 2).join('.')}.${body.toString('base64url')}`, 'connector:1'))).toBe('tampered');
    expect(codeOf(() => new SecretBox([key()]).open(sealed, 'connector:1'))).toBe('unknown_key');
    expect(codeOf(() => box.open('plaintext'))).toBe('malformed');
    expect(codeOf(() => box.open(`sb1.${box.primaryKeyId}.AAAA`))).toBe('malformed');
  });

  it('rotates: the first key seals, every key opens, and reencrypt moves old values to the first key', () => {
    const [oldKey, newKey] = [key(), key()];
    const before = new SecretBox([oldKey]);
    const sealedOld = before.seal('token', 'ctx');
    const after = new SecretBox([newKey, oldKey]);
    expect(after.open(sealedOld, 'ctx')).toBe('token');
    expect(after.needsReencrypt(sealedOld)).toBe(true);
    const moved = after.reencrypt(sealedOld, 'ctx');
    expect(moved.split('.')[1]).toBe(secretKeyId(newKey));
    expect(after.needsReencrypt(moved)).toBe(false);
    expect(after.reencrypt(moved, 'ctx')).toBe(moved);
    // Once the old key is dropped from the list, only re-encrypted values still open.
    const only = new SecretBox([newKey]);
    expect(only.open(moved, 'ctx')).toBe('token');
    expect(codeOf(() => only.open(sealedOld, 'ctx'))).toBe('unknown_key');
  });
});

describe('parseSecretKeys', () => {
  it('reads comma-separated base64 keys (standard or url alphabet), in order', () => {
    const [a, b] = [generateSecretKey(), generateSecretKey()];
    const keys = parseSecretKeys(` ${a}, ${Buffer.from(b, 'base64').toString('base64url')} `, 'KEYS');
    expect(keys.map((k) => k.toString('base64'))).toEqual([a, b]);
    expect(SecretBox.fromEnv({ KEYS: a }, 'KEYS').primaryKeyId).toBe(secretKeyId(Buffer.from(a, 'base64')));
  });

  it.each([
    ['', /is required/],
    [undefined, /is required/],
    ['not base64!', /key 1 is not base64/],
    [randomBytes(16).toString('base64'), /key 1 is 16 bytes/],
  ])('fails naming the variable for %j', (value, message) => {
    let caught: unknown;
    try {
      parseSecretKeys(value, 'CONNECTOR_SECRET_KEYS');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).variable).toBe('CONNECTOR_SECRET_KEYS');
    expect((caught as ConfigError).message).toMatch(message);
  });

  it('refuses a key listed twice', () => {
    const a = generateSecretKey();
    expect(() => parseSecretKeys(`${a},${a}`, 'K')).toThrow(/key 2 is listed twice/);
  });
});
