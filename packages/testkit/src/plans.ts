import type pg from 'pg';

/** A node of `EXPLAIN (FORMAT JSON)`'s plan. */
export interface PlanNode { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; 'Index Cond'?: string; Plans?: PlanNode[] }

/**
 * The plan's nodes that read one of `tables` whole: a sequential scan, or an index scanned without a
 * condition (other than `partialIndexes`, whose predicate is the condition).
 */
export function wholeTableReads(node: PlanNode, tables: Set<string>, partialIndexes: Set<string> = new Set(), found: string[] = []): string[] {
  const table = node['Relation Name'];
  if (table && tables.has(table)) {
    if (node['Node Type'] === 'Seq Scan') found.push(`Seq Scan on ${table}`);
    if (/^Index (Only )?Scan$/.test(node['Node Type']) && !node['Index Cond'] && !partialIndexes.has(node['Index Name'] ?? '')) found.push(`${node['Node Type']} of ${node['Index Name']} without a condition`);
  }
  if (node['Node Type'] === 'Bitmap Index Scan' && !node['Index Cond']) found.push(`Bitmap Index Scan of ${node['Index Name']} without a condition`);
  for (const child of node.Plans ?? []) wholeTableReads(child, tables, partialIndexes, found);
  return found;
}

/**
 * EXPLAINs `text` with sequential scans disabled (on a client of its own, in a transaction rolled back,
 * so nothing it would change is changed): its whole-table reads of `tables`, empty when every read goes
 * by an index with a condition.
 */
export async function wholeTableReadsOf(client: pg.ClientBase, text: string, params: unknown[], tables: string[], partialIndexes: string[] = []): Promise<string[]> {
  await client.query('BEGIN');
  try {
    await client.query('SET LOCAL enable_seqscan = off');
    const result = await client.query(`EXPLAIN (FORMAT JSON) ${text}`, params);
    return wholeTableReads(result.rows[0]['QUERY PLAN'][0].Plan, new Set(tables), new Set(partialIndexes));
  } finally {
    await client.query('ROLLBACK');
  }
}
