// What every bench does on the server before and after its run: create and drop its own database.
import pg from 'pg';

/** Runs one statement (CREATE/DROP DATABASE) on the server's maintenance database. */
export async function adminSql(pgUrl, sql) {
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
