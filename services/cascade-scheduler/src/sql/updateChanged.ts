import { execute, sqlArray, type PoolClient } from '@rrs/runtime';

/*
 * Saving writes only the columns some transition changed: most batches change three or four of them,
 * and every array parameter is built, serialized, sent and parsed. A loaded object keeps its row as
 * loaded (under LOADED) to compare with.
 */

const LOADED = Symbol('loaded');
type Loaded = { [LOADED]?: Record<string, unknown> | unknown[] };

/** Keeps `row` (an object row, or a row of array mode) on `object` as what is stored. */
export function rememberLoaded<T extends object>(object: T, row: Record<string, unknown> | unknown[]): T {
  (object as Loaded)[LOADED] = row;
  return object;
}

export type ColumnValue = string | number | Date | null;

export interface ChangeColumn<T> {
  /** The column, and the field of a loaded object row holding its value. */
  name: string;
  /** Its position in a loaded row of array mode. */
  index?: number;
  /** Array type of the parameter; timestamps travel as epoch milliseconds. */
  type: 'uuid' | 'text' | 'int' | 'float8' | 'jsonb';
  get(row: T): ColumnValue;
  /** SQL of the new value from `u.<name>`. */
  value?: string;
  /** The loaded value in the form `get` returns (default: the field as loaded). */
  loaded?(value: unknown): ColumnValue;
}

/** A timestamp column: sent as epoch milliseconds (runtime `sqlArray`), turned back by the statement. */
export function timestampColumn<T>(name: string, get: (row: T) => Date | null, index?: number): ChangeColumn<T> {
  return { name, index, type: 'float8', get, value: `to_timestamp(u.${name} / 1000)` };
}

function same(a: ColumnValue, b: ColumnValue): boolean {
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  return a === b;
}

function changedSinceLoaded<T>(row: T, column: ChangeColumn<T>): boolean {
  const before = (row as Loaded)[LOADED];
  if (!before) return true;
  const value = (Array.isArray(before) ? before[column.index ?? -1] : before[column.name]) ?? null;
  return !same(column.get(row), column.loaded ? column.loaded(value) : (value as ColumnValue));
}

/**
 * One UPDATE of the rows by id, setting only the columns in which some row differs from its row as
 * loaded (a row never loaded counts as changed in every column); in a coalesced transaction it goes
 * with the next request.
 */
export async function updateChanged<T extends { id: string }>(client: PoolClient, table: string, columns: ChangeColumn<T>[], rows: T[]): Promise<void> {
  const changed = columns.filter((column) => rows.some((row) => changedSinceLoaded(row, column)));
  if (changed.length === 0) return;
  const params = [sqlArray(rows.map((row) => row.id), { bare: true }), ...changed.map((column) => sqlArray(rows.map(column.get)))];
  await execute(client, {
    text: `UPDATE ${table} t SET ${changed.map((column) => `${column.name} = ${column.value ?? `u.${column.name}`}`).join(', ')}
       FROM unnest($1::uuid[], ${changed.map((column, i) => `$${i + 2}::${column.type}[]`).join(', ')}) AS u(id, ${changed.map((column) => column.name).join(', ')})
      WHERE t.id = u.id`,
    values: params,
  });
  // The loaded row no longer says what is stored: a second save in the same transaction (rare) writes
  // every column of these rows.
  for (const row of rows) (row as Loaded)[LOADED] = undefined;
}
