import { sqlArray } from '@rrs/runtime';

/** Element types of the scheduler's batch statements. */
export type ColumnType = 'uuid' | 'text' | 'int' | 'jsonb' | 'bytea' | 'timestamptz';

/** A table's columns as written by a statement: each column name with its type. */
export type ColumnTypes<Row> = { readonly [Column in keyof Row]: ColumnType };

/** Computed columns: SQL over `u.<column>` (the row being inserted) and parameters, by column name. */
export type Computed = Readonly<Record<string, string>>;

/** The parameters of one statement, numbered in the order they are added. */
export class StatementParams {
  readonly values: unknown[] = [];

  /** A parameter, as the SQL that reads it (`$n::type`). */
  add(value: unknown, type: string): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }

  /**
   * One array parameter (`$n::type[]`). Strings and numbers travel as one array literal (runtime
   * `sqlArray`, much cheaper than the driver's element-by-element serialization); bytes and timestamps
   * as the driver writes them.
   */
  array(type: ColumnType, values: unknown[]): string {
    const literal = type === 'bytea' || type === 'timestamptz' ? values : sqlArray(values as Array<string | number | null>);
    return this.add(literal, `${type}[]`);
  }
}

function columnsOf(types: object, computed: Computed): { written: string[]; targets: string[] } {
  const written = Object.keys(types);
  return { written, targets: [...new Set([...written, ...Object.keys(computed)])] };
}

/**
 * `INSERT INTO <table> … SELECT … FROM unnest(…)` of rows given as objects whose keys are the table's
 * column names: one array parameter per column, so one statement writes any number of rows in one
 * round trip. `computed` adds columns, or replaces a written one, with SQL over `u.<column>`.
 */
export function insertRows<Row>(params: StatementParams, table: string, types: ColumnTypes<Row>, rows: readonly Row[], computed: Computed = {}): string {
  const { written, targets } = columnsOf(types, computed);
  const arrays = written.map((column) => params.array(types[column as keyof Row], rows.map((row) => row[column as keyof Row])));
  return `INSERT INTO ${table} (${targets.join(', ')})
       SELECT ${targets.map((column) => computed[column] ?? `u.${column}`).join(', ')}
         FROM unnest(${arrays.join(', ')}) AS u(${written.join(', ')})`;
}

/**
 * `unnest(…) WITH ORDINALITY AS <alias>(<columns>, ordinality)` of rows given as objects: one array
 * parameter per column, the rows numbered from 1 in their order. `given`: columns whose array
 * parameter is already written (SQL by column name), in front. A FROM item that several inserts of one
 * statement read (`insertSelect`).
 */
export function unnestRows<Row>(params: StatementParams, alias: string, types: ColumnTypes<Row>, rows: readonly Row[], given: Readonly<Record<string, string>> = {}): string {
  const columns = Object.keys(types) as Array<keyof Row & string>;
  const arrays = [...Object.values(given), ...columns.map((column) => params.array(types[column], rows.map((row) => row[column])))];
  return `unnest(${arrays.join(', ')}) WITH ORDINALITY AS ${alias}(${[...Object.keys(given), ...columns].join(', ')}, ordinality)`;
}

/** `INSERT INTO <table> (…) SELECT … FROM <from>`: each column of the table with its SQL over `from`. */
export function insertSelect(table: string, values: Computed, from: string): string {
  const columns = Object.keys(values);
  return `INSERT INTO ${table} (${columns.join(', ')})
       SELECT ${columns.map((column) => values[column]).join(', ')}
         FROM ${from}`;
}

/** `INSERT INTO <table> … VALUES (…)` of one row given as an object whose keys are column names. */
export function insertValues<Row>(params: StatementParams, table: string, types: ColumnTypes<Row>, row: Row, computed: Computed = {}): string {
  const { targets } = columnsOf(types, computed);
  const values = targets.map((column) => computed[column] ?? params.add(row[column as keyof Row], types[column as keyof Row]));
  return `INSERT INTO ${table} (${targets.join(', ')}) VALUES (${values.join(', ')})`;
}
