/**
 * Costs that do not grow with history (issue 35): a test records every statement a service runs in a
 * realistic scenario, seeds its history tables, and EXPLAINs each recorded statement with sequential scans
 * disabled. A statement that still reads a history table whole has no index to serve it.
 */
import pg from 'pg';

/** The statements every pg client of this process sent while recording, each once, with its first parameters. */
export interface StatementRecorder {
  readonly statements: Map<string, unknown[]>;
  /** Records from now on (off while the schema is made: the migrations are not statements of the service). */
  start(): void;
  stop(): void;
  /** Puts pg's own query back. */
  restore(): void;
}

const DATA_STATEMENT = /^\s*(WITH|SELECT|UPDATE|DELETE|INSERT)\b/i;
const PREPARED = /^\s*(PREPARE|EXECUTE)\b/i;

/**
 * Patches pg's Client (every pool of this process uses it). With `schema`, only the clients whose
 * search_path is that service schema are recorded (a test stack may run several services in one process).
 */
export function recordStatements(options: { schema?: string } = {}): StatementRecorder {
  const statements = new Map<string, unknown[]>();
  const original = pg.Client.prototype.query;
  let recording = false;
  (pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (this: pg.Client, ...args: unknown[]) {
    const [config, values] = args as [string | { text?: string; values?: unknown[] }, unknown];
    const text = typeof config === 'string' ? config : config?.text;
    const params = Array.isArray(values) ? values : typeof config === 'object' ? config?.values : undefined;
    // A coalesced transaction sends several statements in one (without parameters): each is its own.
    const ours = !options.schema || ((this as unknown as { connectionParameters?: { options?: string } }).connectionParameters?.options ?? '').includes(`search_path=${options.schema}`);
    const sent = !recording || !ours || !text ? [] : params?.length ? [text] : text.split(/;\s*(?=(?:BEGIN|COMMIT|ROLLBACK|SET|SELECT|WITH|UPDATE|INSERT|DELETE|PREPARE|EXECUTE)\b)/i);
    for (const statement of sent) {
      // A prepared statement (runtime's `prepared`) is recorded as its PREPARE, then each EXECUTE of it.
      if ((DATA_STATEMENT.test(statement) || PREPARED.test(statement)) && !statements.has(statement)) statements.set(statement, params ?? []);
    }
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  };
  return {
    statements,
    start: () => { recording = true; },
    stop: () => { recording = false; },
    restore: () => { pg.Client.prototype.query = original; },
  };
}

interface PlanNode { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; 'Index Cond'?: string; Filter?: string; Plans?: PlanNode[] }

/** What the planner says about an index: whether it is partial, and its first key (a column or an expression). */
interface IndexShape { table: string; partial: boolean; firstKey: string }

/**
 * The plan's nodes that read a history table whole: a sequential scan, or an index scanned without a
 * condition on its first key (none at all, or one on a later key only: the whole index is walked).
 */
function wholeTableReads(node: PlanNode, historyTables: ReadonlySet<string>, indexes: Map<string, IndexShape>, found: string[] = [], underLimit = false): string[] {
  const table = node['Relation Name'];
  const index = indexes.get(node['Index Name'] ?? '');
  if (table && historyTables.has(table) && node['Node Type'] === 'Seq Scan') found.push(`Seq Scan on ${table}`);
  if (/^(Index (Only )?Scan|Bitmap Index Scan)$/.test(node['Node Type']) && index && historyTables.has(index.table)) {
    // A partial index (a timer wheel, the unfinished rows) holds only what is due, however long the
    // history; the first page of a list read in index order, unfiltered, under a LIMIT reads that page only.
    const bounded = index.partial || (underLimit && !node.Filter && node['Node Type'] !== 'Bitmap Index Scan');
    const condition = node['Index Cond'];
    if (!condition && !bounded) found.push(`${node['Node Type']} of ${node['Index Name']} without a condition`);
    else if (condition && !index.partial && !mentions(condition, index.firstKey)) found.push(`${node['Node Type']} of ${node['Index Name']} without a condition on its first key (${index.firstKey})`);
  }
  for (const child of node.Plans ?? []) wholeTableReads(child, historyTables, indexes, found, node['Node Type'] === 'Limit');
  return found;
}

function mentions(condition: string, key: string): boolean {
  const bare = key.replace(/^\((.*)\)$/, '$1');
  return new RegExp(`(^|[^\\w])${bare.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^\\w])`).test(condition);
}

/** Statements of the schema's bookkeeping (migrations, locks, the catalog) are not history reads. */
const BOOKKEEPING = /schema_migrations|pg_advisory|information_schema|pg_catalog/;

/**
 * Plans each statement on the (seeded, ANALYZEd) database with sequential scans disabled and returns, per
 * statement, the history tables it reads whole; empty when every one goes through an index.
 * `searchPath` is the service's schema when its tables live outside `public`.
 */
export async function historyScans(connectionString: string, statements: Map<string, unknown[]>, historyTables: Iterable<string>, options: { searchPath?: string } = {}): Promise<string[]> {
  const tables = new Set(historyTables);
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    if (options.searchPath) await client.query(`SET search_path TO ${options.searchPath}, public`);
    const { rows: shapes } = await client.query(
      `SELECT c.relname AS name, t.relname AS table, i.indpred IS NOT NULL AS partial, pg_get_indexdef(i.indexrelid, 1, true) AS first_key
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
        WHERE c.relnamespace = current_schema()::regnamespace`,
    );
    const indexes = new Map(shapes.map((row) => [row.name as string, { table: row.table as string, partial: row.partial as boolean, firstKey: row.first_key as string }]));
    // Without sequential scans one that remains means no index can serve the statement (the small tables
    // of a test database would otherwise be scanned because that is cheaper there).
    await client.query('SET enable_seqscan = off');
    const failures: string[] = [];
    for (const [text, params] of statements) {
      if (BOOKKEEPING.test(text)) continue;
      // Prepared here as it was there (recorded before its EXECUTEs), then planned as each EXECUTE ran it.
      if (/^\s*PREPARE\b/i.test(text)) {
        await client.query(text);
        continue;
      }
      const result = await client.query(`EXPLAIN (FORMAT JSON) ${text}`, params);
      const reads = wholeTableReads(result.rows[0]['QUERY PLAN'][0].Plan, tables, indexes);
      if (reads.length > 0) failures.push(`${reads.join(', ')}\n  in: ${text.replace(/\s+/g, ' ').slice(0, 300)}`);
    }
    return failures;
  } finally {
    await client.end();
  }
}
