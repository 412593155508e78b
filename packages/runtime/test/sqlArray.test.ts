import { createTestDatabase, type TestDatabase } from '@rrs/testkit';
import { createPool, sqlArray, type Pool } from '../src';

describe('sqlArray and session settings (real PostgreSQL)', () => {
  let db: TestDatabase;
  let pool: Pool;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: 'public', max: 2, settings: { random_page_cost: '1.1', 'application_name': 'sql_array_test' } });
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  it('round-trips text that needs quoting, empty strings, NULL and the word NULL', async () => {
    const values = ['plain', 'with space', '', null, 'NULL', 'null', 'quote"inside', 'back\\slash', 'both\\"', '""', 'ünïcode', '{brace}', 'comma,', ' lead', 'trail ', "it's", 'line\nbreak'];
    const { rows } = await pool.query<{ a: Array<string | null> }>('SELECT $1::text[] AS a', [sqlArray(values)]);
    expect(rows[0].a).toEqual(values);
  });

  it('writes numbers, booleans and dates (as epoch milliseconds), and ids bare', async () => {
    const at = new Date('2026-11-21T08:00:00.123Z');
    const { rows } = await pool.query<{ n: number[]; b: boolean[]; t: Array<Date | null>; u: string[] }>(
      'SELECT $1::float8[] AS n, $2::bool[] AS b, array(SELECT to_timestamp(x / 1000) FROM unnest($3::float8[]) AS x) AS t, $4::uuid[] AS u',
      [sqlArray([1, -2.5, 0]), sqlArray([true, false]), sqlArray([at, null]), sqlArray(['0190e0e0-0000-7000-8000-00000000b001'], { bare: true })],
    );
    expect(rows[0]).toEqual({ n: [1, -2.5, 0], b: [true, false], t: [at, null], u: ['0190e0e0-0000-7000-8000-00000000b001'] });
  });

  it('refuses numbers an array literal cannot hold', () => {
    expect(() => sqlArray([Number.NaN])).toThrow(/NaN/);
    expect(() => sqlArray([Number.POSITIVE_INFINITY])).toThrow(/Infinity/);
  });

  it('applies session settings to every connection, and refuses names and values that could break the startup options', async () => {
    const { rows } = await pool.query<{ random_page_cost: string }>('SHOW random_page_cost');
    expect(rows[0].random_page_cost).toBe('1.1');
    expect(() => createPool({ url: db.url, schema: 'public', settings: { 'bad name': '1' } })).toThrow(/setting name/);
    expect(() => createPool({ url: db.url, schema: 'public', settings: { work_mem: '4MB -c fsync=off' } })).toThrow(/setting value/);
  });
});
