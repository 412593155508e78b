import { newRequestId } from '../src/http/requestId';

/** The id the gateway gives a request that brings none: a random version 4 UUID, like `crypto.randomUUID`. */
describe('newRequestId', () => {
  it('is a version 4 UUID, distinct across several fills of the random pool', () => {
    const ids = Array.from({ length: 1000 }, () => newRequestId());
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('uses every hex digit in every random position (no digit stuck)', () => {
    const seen = Array.from({ length: 36 }, () => new Set<string>());
    for (let n = 0; n < 2000; n++) [...newRequestId()].forEach((c, i) => seen[i].add(c));
    const sizes = seen.map((s) => s.size);
    // Dashes at 8, 13, 18, 23; the version digit at 14; the variant digit (8, 9, a, b) at 19.
    expect(sizes).toEqual(sizes.map((_, i) => ([8, 13, 18, 23, 14].includes(i) ? 1 : i === 19 ? 4 : 16)));
  });
});
