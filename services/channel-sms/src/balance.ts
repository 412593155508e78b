import type { contactsV1 } from '@rrs/proto';
import { DomainError, isErrorKind, StatementBatcher, type PromiseClient } from '@rrs/runtime';

/** The organization's SMS balance, owned by `contacts`. */
export interface SmsBalance {
  /**
   * Debits `parts` for the step, atomically and at most once per step id: a repeat for the same step
   * answers what the first call did, so a redelivered step is never charged twice.
   */
  debit(request: { organizationId: string; stepId: string; parts: number }): Promise<{ debited: boolean; balance: number }>;
}

type DebitRequest = { organizationId: string; stepId: string; parts: number };
type DebitAnswer = { debited: boolean; balance: number };

/** Most debits in one DebitSmsBalances call (contacts' limit). */
const MAX_DEBITS_PER_CALL = 500;
/** gRPC status UNIMPLEMENTED: a contacts of an earlier version, without DebitSmsBalances. */
const GRPC_UNIMPLEMENTED = 12;

/**
 * The balance at contacts. The debits of the steps in flight go in one DebitSmsBalances call: those
 * made during one event-loop turn, plus those that came while the previous call was out (one call at a
 * time), so a gRPC call per SMS becomes one per batch in channel-sms and in contacts alike. Each debit
 * still gets its own answer or its own error. A contacts without DebitSmsBalances (UNIMPLEMENTED, during
 * a rolling upgrade) is then called once per debit, as before.
 */
export function contactsSmsBalance(client: PromiseClient<contactsV1.ContactsServiceClient>): SmsBalance {
  let batched = true;
  const one = async (request: DebitRequest): Promise<DebitAnswer> => {
    const answer = await client.debitSmsBalance(request);
    return { debited: answer.debited, balance: Number(answer.balance) };
  };
  // Each debit its own call, each answered or refused on its own: a contacts without the batch RPC.
  const oneByOne = (requests: DebitRequest[]) => Promise.all(requests.map((request) => one(request).catch((err: unknown) => toDomainError(err))));
  const debits = new StatementBatcher<DebitRequest, DebitAnswer | DomainError>(
    async (requests) => {
      if (!batched) return oneByOne(requests);
      let answer: contactsV1.DebitSmsBalancesResponse;
      try {
        answer = await client.debitSmsBalances({ debits: requests });
      } catch (err) {
        if (!isUnimplemented(err)) throw err;
        batched = false;
        return oneByOne(requests);
      }
      if (answer.outcomes.length !== requests.length) throw new Error(`contacts answered ${answer.outcomes.length} debit outcomes for ${requests.length} debits`);
      return answer.outcomes.map(({ outcome }): DebitAnswer | DomainError => {
        if (outcome?.$case === 'debit') return { debited: outcome.debit.debited, balance: Number(outcome.debit.balance) };
        if (outcome?.$case === 'error') return new DomainError(isErrorKind(outcome.error.kind) ? outcome.error.kind : 'internal', outcome.error.code, outcome.error.message);
        return new DomainError('internal', 'internal', 'contacts answered a debit without an outcome');
      });
    },
    { key: (request) => request.stepId, maxBatch: MAX_DEBITS_PER_CALL },
  );
  return {
    async debit(request) {
      const answer = await debits.submit({ organizationId: request.organizationId, stepId: request.stepId, parts: request.parts });
      if (answer instanceof Error) throw answer;
      return answer;
    },
  };
}

function isUnimplemented(err: unknown): boolean {
  return err instanceof Error && (err.cause as { code?: unknown } | undefined)?.code === GRPC_UNIMPLEMENTED;
}

/** A single call's failure as one debit's answer, so it fails that debit only. */
function toDomainError(err: unknown): DomainError {
  return err instanceof DomainError ? err : new DomainError('internal', 'internal', (err as Error).message ?? String(err), { cause: err });
}
