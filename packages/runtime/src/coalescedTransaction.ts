import { createHash } from 'node:crypto';
import type pg from 'pg';

/*
 * A transaction whose statements travel in as few requests as its logic allows. Each request to
 * PostgreSQL costs a socket write that wakes the server and one that wakes us (~100+ µs each on a small
 * VM), and node-postgres has no pipeline mode. So: BEGIN and every statement whose result the caller
 * does not read (`execute`) wait and go out in front of the next statement whose result is needed, and
 * the last ones in front of COMMIT; reads that do not depend on each other go out together
 * (`queryEach`). Statements that travel together are one simple-protocol Query of several statements,
 * their parameters written as literals; they run in order, in the transaction, exactly as if sent one by
 * one, and the first that fails fails the request (the transaction is then rolled back).
 */

// node-postgres's own conversion of a parameter to its text form (arrays, dates, buffers, objects), so a
// literal carries exactly what the extended protocol would have sent.
const { prepareValue } = require('pg/lib/utils') as { prepareValue(value: unknown): string | Buffer | null };

export interface Statement {
  text: string;
  values?: readonly unknown[];
  /** `array`: rows as arrays (node-postgres's rowMode); default: objects keyed by column name. */
  rowMode?: 'array';
  /**
   * The text is one of a fixed few (built from options, never from data): PostgreSQL parses it once per
   * connection and runs it by name after (a prepared statement, whose plan PostgreSQL caches once five
   * runs have shown a generic plan costs no more). For the statements whose parsing and planning cost
   * more than running them for one recipient (readStates: ~0.9 ms of planning for 0.3 ms of work).
   */
  prepared?: boolean;
}

/** A prepared statement's name for a text: the same for the same text in every process. */
const preparedNames = new Map<string, string>();
function preparedName(text: string): string {
  let name = preparedNames.get(text);
  if (name === undefined) {
    // Texts are a fixed few; a caller that built them from data would only lose the cache.
    if (preparedNames.size >= 1_000) preparedNames.clear();
    name = `rrs_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
    preparedNames.set(text, name);
  }
  return name;
}

/**
 * The statements prepared with SQL's PREPARE on each connection (name of the text → name it has there).
 * A name is recorded once the request that prepared it succeeded; a request that failed may or may not
 * have prepared it, so the next one prepares it again under a new name (PREPARE is not undone by a
 * rollback, and an existing name cannot be prepared again). Protocol-level prepared statements
 * (node-postgres's own `name`) are told apart by their suffix-less names.
 */
const preparedOn = new WeakMap<object, Map<string, string>>();
let preparations = 0;

/** A SQL string literal of `text` (node-postgres's `escapeLiteral`, without its per-character loop). */
function quote(text: string): string {
  const body = text.replace(/'/g, "''");
  // With backslashes, the E'' form reads the same whatever standard_conforming_strings is.
  return text.includes('\\') ? ` E'${body.replace(/\\/g, '\\\\')}'` : `'${body}'`;
}

function literal(value: unknown): string {
  const prepared = prepareValue(value);
  if (prepared === null) return 'NULL';
  // The E'' form reads the same whatever standard_conforming_strings is.
  if (Buffer.isBuffer(prepared)) return `E'\\\\x${prepared.toString('hex')}'`;
  // An untyped literal, like the extended protocol's untyped parameter: the server infers its type.
  return quote(prepared);
}

/**
 * `text` with `$n` replaced by the literal of `values[n-1]`. Placeholders inside quoted strings or
 * identifiers are left alone; statements passed here use no dollar-quoting or comments.
 */
export function inlineParameters(text: string, values: readonly unknown[] = []): string {
  if (values.length === 0) return text;
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "'" || c === '"') {
      const end = closingQuote(text, i);
      out += text.slice(i, end);
      i = end;
      continue;
    }
    if (c === '$' && i + 1 < text.length && text[i + 1] >= '0' && text[i + 1] <= '9') {
      let j = i + 1;
      while (j < text.length && text[j] >= '0' && text[j] <= '9') j++;
      const n = Number(text.slice(i + 1, j));
      if (n < 1 || n > values.length) throw new Error(`statement refers to $${n} but has ${values.length} parameters`);
      out += literal(values[n - 1]);
      i = j;
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

/** Index just past the quoted string or identifier opening at `start` (a doubled quote stays inside). */
function closingQuote(text: string, start: number): number {
  const q = text[start];
  let i = start + 1;
  while (i < text.length) {
    if (text[i] === q) {
      if (text[i + 1] === q) {
        i += 2;
        continue;
      }
      return i + 1;
    }
    i++;
  }
  return i;
}

function asObjects(result: pg.QueryResult): pg.QueryResult {
  const names = result.fields.map((field) => field.name);
  const rows = (result.rows as unknown as unknown[][]).map((row) => {
    const object: Record<string, unknown> = {};
    for (let k = 0; k < names.length; k++) object[names[k]] = row[k];
    return object;
  });
  return { ...result, rows };
}

/** One statement as node-postgres runs it (extended protocol, parameters apart). */
function runOne(client: pg.Pool | pg.PoolClient, statement: Statement): Promise<pg.QueryResult> {
  const values = statement.values as unknown[] | undefined;
  const name = statement.prepared ? preparedName(statement.text) : undefined;
  if (statement.rowMode === 'array') return client.query({ name, text: statement.text, values, rowMode: 'array' }) as Promise<pg.QueryResult>;
  return client.query({ name, text: statement.text, values });
}

/** Results of a Query of several statements, each in the row mode its statement asked for. */
function splitResults(raw: pg.QueryResult | pg.QueryResult[], statements: Statement[], ahead: number): pg.QueryResult[] {
  const results = Array.isArray(raw) ? raw : [raw];
  return statements.map((statement, k) => (statement.rowMode === 'array' ? results[ahead + k] : asObjects(results[ahead + k])));
}

/**
 * Runs statements, in order, as one request and one implicit transaction: all of them commit, or none
 * (the first failure fails the request). Several go as one simple-protocol Query with their parameters
 * written as literals; a single one as node-postgres sends it.
 */
export async function queryTogether(db: pg.Pool | pg.PoolClient, statements: Statement[]): Promise<pg.QueryResult[]> {
  if (statements.length === 0) return [];
  if (statements.length === 1) return [await runOne(db, statements[0])];
  const text = statements.map((statement) => inlineParameters(statement.text, statement.values)).join(';\n');
  const raw = (await db.query({ text, rowMode: 'array' })) as unknown as pg.QueryResult | pg.QueryResult[];
  return splitResults(raw, statements, 0);
}

/** The coalescing state of a client handed out by `inCoalescedTransaction`. */
class Coalescer {
  /** Statements (literal SQL) waiting for the next request. */
  private waiting: string[] = ['BEGIN'];
  /** Reads that go after COMMIT, in its request (`readAfterCommit`). */
  readonly after: Array<{ statement: Statement; resolve: (read: { result: pg.QueryResult; sentAt: number } | null) => void }> = [];
  /** Whether a request has gone out: only then is there a transaction to end. */
  sent = false;

  /** Statements the next request prepares (PREPARE, in front of it): [name of the text, name here, text]. */
  private preparing: Array<[string, string, string]> = [];
  /** Names of texts the next request runs by a name prepared before. */
  private executing: string[] = [];

  constructor(private readonly client: pg.PoolClient) {}

  defer(statement: Statement): void {
    this.waiting.push(this.sqlOf(statement));
  }

  /** A statement as SQL with its values as literals: `EXECUTE` of its prepared name, for a prepared one. */
  private sqlOf(statement: Statement): string {
    if (!statement.prepared) return inlineParameters(statement.text, statement.values);
    const name = preparedName(statement.text);
    let here = preparedOn.get(this.client)?.get(name);
    if (here !== undefined) this.executing.push(name);
    else {
      here = this.preparing.find(([preparing]) => preparing === name)?.[1];
      if (here === undefined) {
        here = `${name}_${++preparations}`;
        this.preparing.push([name, here, statement.text]);
      }
    }
    const values = statement.values ?? [];
    return values.length === 0 ? `EXECUTE ${here}` : `EXECUTE ${here}(${values.map(literal).join(', ')})`;
  }

  /** Sends what waits and these statements as one request; returns these statements' results. */
  async send(statements: Statement[]): Promise<pg.QueryResult[]> {
    const texts = [...this.waiting, ...statements.map((statement) => this.sqlOf(statement))];
    const preparing = this.preparing;
    const executing = this.executing;
    this.preparing = [];
    this.executing = [];
    const prepares = preparing.map(([, here, text]) => `PREPARE ${here} AS ${text}`);
    const ahead = prepares.length + this.waiting.length;
    this.waiting = [];
    if (texts.length === 0) return [];
    this.sent = true;
    let raw: pg.QueryResult | pg.QueryResult[];
    try {
      raw = (await this.client.query({ text: [...prepares, ...texts].join(';\n'), rowMode: 'array' })) as unknown as pg.QueryResult | pg.QueryResult[];
    } catch (err) {
      // A prepared statement that failed to run (a table changed under its cached plan) is prepared again next time.
      const known = preparedOn.get(this.client);
      for (const name of executing) known?.delete(name);
      throw err;
    }
    if (preparing.length > 0) {
      let known = preparedOn.get(this.client);
      if (!known) preparedOn.set(this.client, (known = new Map()));
      for (const [name, here] of preparing) known.set(name, here);
    }
    return splitResults(raw, statements, ahead);
  }

  /** A statement as node-postgres runs it, when nothing waits (no literal to write); else with what waits. */
  async query(statement: Statement): Promise<pg.QueryResult> {
    if (this.waiting.length === 0) {
      this.sent = true;
      return runOne(this.client, statement);
    }
    return (await this.send([statement]))[0];
  }

  waitingCount(): number {
    return this.waiting.length;
  }
}

const coalescers = new WeakMap<object, Coalescer>();

/**
 * Runs `statement` now, or, on a client of `inCoalescedTransaction`, with the transaction's next request
 * (its result unread: a write, a notification). Its failure then fails that later request and the
 * transaction; callers that must handle a statement's own error use `client.query`.
 */
export async function execute(client: pg.PoolClient, statement: Statement): Promise<void> {
  const coalescer = coalescers.get(client);
  if (coalescer) coalescer.defer(statement);
  else await client.query({ text: statement.text, values: statement.values as unknown[] | undefined });
}

/**
 * Runs independent statements, in order, and returns their results: one request on a client of
 * `inCoalescedTransaction` (with whatever waits for it), one after another on any other client.
 */
export async function queryEach(client: pg.PoolClient, statements: Statement[]): Promise<pg.QueryResult[]> {
  const coalescer = coalescers.get(client);
  if (coalescer) return coalescer.send(statements);
  const results: pg.QueryResult[] = [];
  for (const statement of statements) results.push(await runOne(client, statement));
  return results;
}

/**
 * A read that travels after the transaction's COMMIT, in COMMIT's own request, and runs in an implicit
 * transaction of its own: it sees what the transaction wrote, and costs no request of its own. Resolves
 * once the transaction has ended: with its result and when its request was sent (epoch ms), or null
 * when it did not run (the transaction rolled back, its commit failed, or `client` is not a client of
 * `inCoalescedTransaction`) — the caller then asks by itself.
 */
export function readAfterCommit(client: pg.PoolClient, statement: Statement): Promise<{ result: pg.QueryResult; sentAt: number } | null> {
  const coalescer = coalescers.get(client);
  if (!coalescer) return Promise.resolve(null);
  return new Promise((resolve) => coalescer.after.push({ statement, resolve }));
}

/**
 * As `inTransaction` (runtime db.ts): COMMIT when `fn` returns, ROLLBACK when it throws, a client whose
 * ROLLBACK failed destroyed. The client `fn` gets sends BEGIN with its first statement, `execute`d
 * statements with the next request, and the last of them with COMMIT: a transaction of N reads in
 * sequence and any number of writes after them is N + 1 requests. `client.query` on it is
 * node-postgres's (promise form only) with waiting statements sent in front.
 */
export async function inCoalescedTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const coalescer = new Coalescer(client);
  const wrapped = new Proxy(client, {
    get(target, property) {
      if (property === 'query') {
        return (config: string | Statement, values?: unknown[]) => {
          const statement: Statement = typeof config === 'string' ? { text: config, values } : { text: config.text, values: config.values ?? values, rowMode: config.rowMode, prepared: config.prepared };
          return coalescer.query(statement);
        };
      }
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  coalescers.set(wrapped, coalescer);
  let broken: Error | undefined;
  try {
    const result = await fn(wrapped);
    // Nothing was ever sent (only BEGIN waits): there is no transaction to commit.
    if (coalescer.sent || coalescer.waitingCount() > 1) {
      coalescer.defer({ text: 'COMMIT' });
      const after = coalescer.after.map((read) => read.statement);
      const sentAt = Date.now();
      const results = await coalescer.send(after);
      coalescer.after.forEach((read, k) => read.resolve({ result: results[k], sentAt }));
    }
    return result;
  } catch (err) {
    if (coalescer.sent) {
      try {
        await client.query('ROLLBACK');
      } catch (rollbackFailed) {
        broken = rollbackFailed as Error;
      }
    }
    throw err;
  } finally {
    coalescers.delete(wrapped);
    // Reads after a COMMIT that was never sent or failed did not run (a resolved one stays resolved).
    for (const read of coalescer.after) read.resolve(null);
    client.release(broken);
  }
}
