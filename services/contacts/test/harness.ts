import { createGrpcClient, type PromiseClient } from '@rrs/runtime';
import { contactsV1 } from '@rrs/proto';
import { createTestDatabase, testContext, type TestDatabase } from '@rrs/testkit';
import { startContacts, type RunningContacts } from '../src';

/** A contacts service on a fresh database, with a real gRPC client to it. */
export interface ContactsHarness {
  db: TestDatabase;
  service: RunningContacts;
  client: PromiseClient<contactsV1.ContactsServiceClient>;
  /** Stops the service (not the database), e.g. to start another one on the same data. */
  stopService(): Promise<void>;
  restart(): Promise<void>;
  close(): Promise<void>;
}

export async function startHarness(label: string): Promise<ContactsHarness> {
  const db = await createTestDatabase();
  let ctx = testContext(label);
  const boot = async () => {
    const service = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    const grpc = createGrpcClient(contactsV1.ContactsServiceClient, `127.0.0.1:${service.grpcPort}`);
    ctx.lifecycle.onStop('test client', () => grpc.close());
    return { service, client: grpc.client };
  };
  const h = { db, ...(await boot()) } as ContactsHarness;
  h.stopService = () => ctx.stop();
  h.restart = async () => {
    await ctx.stop();
    ctx = testContext(label);
    Object.assign(h, await boot());
  };
  h.close = async () => {
    await ctx.stop();
    await db.drop();
  };
  return h;
}

/** Runs `p` and returns the AppError it rejects with (fails the test when it resolves). */
export async function failure(p: Promise<unknown>): Promise<{ status: number; code: string; message: string; details?: Record<string, unknown> }> {
  try {
    await p;
  } catch (err) {
    return err as { status: number; code: string; message: string; details?: Record<string, unknown> };
  }
  throw new Error('expected the call to fail, but it succeeded');
}

export async function count(h: ContactsHarness, table: string, where = 'true', params: unknown[] = []): Promise<number> {
  const { default: pg } = await import('pg');
  const c = new pg.Client({ connectionString: h.db.url });
  await c.connect();
  try {
    const { rows } = await c.query(`SELECT count(*)::int AS n FROM contacts.${table} WHERE ${where}`, params);
    return rows[0].n as number;
  } finally {
    await c.end();
  }
}

export async function queryRows<T>(h: ContactsHarness, sql: string, params: unknown[] = []): Promise<T[]> {
  const { default: pg } = await import('pg');
  const c = new pg.Client({ connectionString: h.db.url });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}
