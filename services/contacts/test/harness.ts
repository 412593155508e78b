import { createGrpcClient, DomainError, httpStatusOf, type PromiseClient } from '@rrs/runtime';
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
  const harness = { db, ...(await boot()) } as ContactsHarness;
  harness.stopService = () => ctx.stop();
  harness.restart = async () => {
    await ctx.stop();
    ctx = testContext(label);
    Object.assign(harness, await boot());
  };
  harness.close = async () => {
    await ctx.stop();
    await db.drop();
  };
  return harness;
}

/** A refused call's error, with the HTTP status the gateway answers its kind with (`status`). */
export type Refusal = DomainError & { status: number };

export function asRefusal(err: unknown): Refusal {
  if (!(err instanceof DomainError)) throw err;
  return Object.assign(err, { status: httpStatusOf(err) });
}

/** Runs `call` and returns the error it rejects with (fails the test when it resolves). */
export async function failure(call: Promise<unknown>): Promise<Refusal> {
  try {
    await call;
  } catch (err) {
    return asRefusal(err);
  }
  throw new Error('expected the call to fail, but it succeeded');
}

export async function count(harness: ContactsHarness, table: string, where = 'true', params: unknown[] = []): Promise<number> {
  const rows = await queryRows<{ total: number }>(harness, `SELECT count(*)::int AS total FROM contacts.${table} WHERE ${where}`, params);
  return rows[0].total;
}

export async function queryRows<T>(harness: ContactsHarness, sql: string, params: unknown[] = []): Promise<T[]> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: harness.db.url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}
