import * as grpc from '@grpc/grpc-js';
import { contactsV1 } from '@rrs/proto';
import { createGrpcClient, type PromiseClient } from '@rrs/runtime';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { createTestDatabase, testContext, type TestDatabase } from '@rrs/testkit';
import { contactsSmsBalance } from '../src';

type Client = PromiseClient<contactsV1.ContactsServiceClient>;

/** The client side of the SMS balance against a real contacts (gRPC, PostgreSQL). */
describe('contactsSmsBalance', () => {
  let db: TestDatabase;
  let contacts: RunningContacts;
  let handle: ReturnType<typeof createGrpcClient<contactsV1.ContactsServiceClient>>;
  const ctx = testContext('sms-balance');

  beforeAll(async () => {
    db = await createTestDatabase();
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    handle = createGrpcClient(contactsV1.ContactsServiceClient, `127.0.0.1:${contacts.grpcPort}`);
  });
  afterAll(async () => {
    handle.close();
    await ctx.stop();
    await db.drop();
  });

  /** The real client, counting the calls of each debit method. */
  const counted = () => {
    const calls = { single: 0, batched: 0, sizes: [] as number[] };
    const client = {
      debitSmsBalance: (req: contactsV1.DebitSmsBalanceRequest) => {
        calls.single++;
        return handle.client.debitSmsBalance(req);
      },
      debitSmsBalances: (req: contactsV1.DebitSmsBalancesRequest) => {
        calls.batched++;
        calls.sizes.push(req.debits.length);
        return handle.client.debitSmsBalances(req);
      },
    } as unknown as Client;
    return { client, calls };
  };
  const org = async (smsBalance: number) => (await contacts.directory.createOrganization({ name: 'Acme', plan: 'standard', emailConfirmed: true, locale: 'ru', defaultRegion: 'RU', smsBalance, sendWindow: null, cooldownDays: 0 })).id;

  it('sends concurrent debits in batches, each answered on its own; the balance never goes below zero', async () => {
    const organizationId = await org(30);
    const { client, calls } = counted();
    const balance = contactsSmsBalance(client);
    const answers = await Promise.all(Array.from({ length: 40 }, (_v, i) => balance.debit({ organizationId, stepId: `b-${i}`, parts: 1 })));
    expect(answers.filter((a) => a.debited)).toHaveLength(30);
    expect(answers.filter((a) => !a.debited).every((a) => a.balance === 0)).toBe(true);
    expect((await contacts.directory.getOrganization(organizationId)).smsBalance).toBe(0);
    expect(calls.single).toBe(0);
    // 40 debits made in one turn go in one call.
    expect(calls.sizes).toEqual([40]);
    // A repeat answers the first outcome and debits nothing more.
    expect(await balance.debit({ organizationId, stepId: 'b-0', parts: 1 })).toEqual(answers[0]);
  });

  it('fails only the debit contacts refuses (unknown organization, a step id of another organization)', async () => {
    const first = await org(5);
    const second = await org(5);
    const balance = contactsSmsBalance(counted().client);
    await balance.debit({ organizationId: first, stepId: 'taken', parts: 1 });
    const settled = await Promise.allSettled([
      balance.debit({ organizationId: first, stepId: 'ok-1', parts: 2 }),
      balance.debit({ organizationId: '0190c3c4-0000-7000-8000-0000000000aa', stepId: 'nobody', parts: 1 }),
      balance.debit({ organizationId: second, stepId: 'taken', parts: 1 }),
      balance.debit({ organizationId: second, stepId: 'ok-2', parts: 1 }),
    ]);
    expect(settled[0]).toEqual({ status: 'fulfilled', value: { debited: true, balance: 2 } });
    expect(settled[1]).toMatchObject({ status: 'rejected', reason: { kind: 'not_found' } });
    expect(settled[2]).toMatchObject({ status: 'rejected', reason: { kind: 'conflict', code: 'step_id_reused' } });
    expect(settled[3]).toEqual({ status: 'fulfilled', value: { debited: true, balance: 4 } });
  });

  it('calls DebitSmsBalance once per debit when contacts has no DebitSmsBalances (an earlier version)', async () => {
    // A contacts server of an earlier version: DebitSmsBalance only (grpc-js answers UNIMPLEMENTED for the rest).
    const server = new grpc.Server();
    const seen: string[] = [];
    server.addService(contactsV1.ContactsServiceService, {
      debitSmsBalance: (call: grpc.ServerUnaryCall<contactsV1.DebitSmsBalanceRequest, contactsV1.DebitSmsBalanceResponse>, callback: grpc.sendUnaryData<contactsV1.DebitSmsBalanceResponse>) => {
        seen.push(call.request.stepId);
        callback(null, { debited: true, balance: 9 });
      },
    } as unknown as grpc.UntypedServiceImplementation);
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))));
    const old = createGrpcClient(contactsV1.ContactsServiceClient, `127.0.0.1:${port}`);
    try {
      const balance = contactsSmsBalance(old.client);
      const answers = await Promise.all(['o-1', 'o-2', 'o-3'].map((stepId) => balance.debit({ organizationId: '0190c3c4-0000-7000-8000-0000000000bb', stepId, parts: 1 })));
      expect(answers).toEqual([{ debited: true, balance: 9 }, { debited: true, balance: 9 }, { debited: true, balance: 9 }]);
      expect(await balance.debit({ organizationId: '0190c3c4-0000-7000-8000-0000000000bb', stepId: 'o-4', parts: 1 })).toEqual({ debited: true, balance: 9 });
      expect(seen.sort()).toEqual(['o-1', 'o-2', 'o-3', 'o-4']);
    } finally {
      old.close();
      server.forceShutdown();
    }
  });
});
