// pg_stat_statements per bench round (BENCH_STATEMENTS=<dir>): shared by the benches that look for the
// statement a change made costlier.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * With BENCH_STATEMENTS=<dir> and pg_stat_statements loaded (shared_preload_libraries), the statements
 * this database ran in each send round, slowest in total first, are written to <dir>/<label>.txt: what
 * grows with history shows as a statement whose time grew between the empty and the seeded run.
 */
export async function statementStats(db) {
  const dir = process.env.BENCH_STATEMENTS;
  if (!dir) return { reset: async () => {}, dump: async () => {} };
  await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public');
  const dbid = (await db.query('SELECT oid FROM pg_database WHERE datname = current_database()')).rows[0].oid;
  return {
    reset: async () => { await db.query('SELECT public.pg_stat_statements_reset(0, $1, 0)', [dbid]); },
    dump: async (label) => {
      const { rows } = await db.query(
        `SELECT calls, round(total_exec_time::numeric, 1) AS total_ms, round((total_exec_time / calls)::numeric, 3) AS mean_ms, rows,
                shared_blks_hit AS hit, shared_blks_read AS read, shared_blks_dirtied AS dirtied, round(blk_read_time::numeric, 1) AS read_ms,
                left(regexp_replace(query, '\\s+', ' ', 'g'), 220) AS query
           FROM public.pg_stat_statements WHERE dbid = $1 ORDER BY total_exec_time DESC LIMIT 40`, [dbid]);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `${label}.txt`), rows.map((r) => `${r.total_ms}\t${r.calls}\t${r.mean_ms}\trows=${r.rows}\thit=${r.hit}\tread=${r.read}\tdirt=${r.dirtied}\tread_ms=${r.read_ms}\t${r.query}`).join('\n') + '\n');
    },
  };
}

