import { displayParts, generateApiKey, hashApiKey, isWellFormedApiKey } from '../src/apiKeys';

describe('API keys', () => {
  it('have the rrs_ prefix, 36 characters after it, and pass their own checksum', () => {
    const key = generateApiKey();
    expect(key).toMatch(/^rrs_[0-9A-Za-z]{36}$/);
    expect(isWellFormedApiKey(key)).toBe(true);
  });

  it('are different every time', () => {
    const keys = new Set(Array.from({ length: 1000 }, generateApiKey));
    expect(keys.size).toBe(1000);
  });

  it('fail the checksum when one character is changed', () => {
    const key = generateApiKey();
    const position = 10;
    const changed = key.slice(0, position) + (key[position] === 'a' ? 'b' : 'a') + key.slice(position + 1);
    expect(isWellFormedApiKey(changed)).toBe(false);
  });

  it.each(['', 'rrs_', 'Bearer x', 'sk_live_abc', `rrs_${'a'.repeat(35)}`, `xxx_${'a'.repeat(36)}`])('refuses %j', (candidate) => {
    expect(isWellFormedApiKey(candidate)).toBe(false);
  });

  it('show only a prefix and the last four characters', () => {
    const key = generateApiKey();
    expect(displayParts(key)).toEqual({ prefix: key.slice(0, 8), last4: key.slice(-4) });
    expect(hashApiKey(key)).toHaveLength(32);
  });
});
