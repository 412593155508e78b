import type { Pool, Statement } from '@rrs/runtime';

/** The read of `msUntilEarliest`, as a statement (one that travels with another request); its row's `ms`. */
export function earliestStatement(column: string, table: string, where: string): Statement {
  return { text: `SELECT (extract(epoch FROM min(${column}) - clock_timestamp()) * 1000)::float8 AS ms FROM ${table} WHERE ${where}` };
}

/**
 * Milliseconds from now (the database clock) to the earliest `column` of the rows of `table` matching
 * `where`: negative when already due, null when there is none. What a due-work loop sleeps for.
 */
export async function msUntilEarliest(pool: Pool, column: string, table: string, where: string): Promise<number | null> {
  const { rows } = await pool.query<{ ms: number | null }>(earliestStatement(column, table, where).text);
  return rows[0].ms;
}
