import type { contactsV1 } from '@rrs/proto';
import type { PromiseClient } from '@rrs/runtime';

/** The organization's SMS balance, owned by `contacts`. */
export interface SmsBalance {
  /**
   * Debits `parts` for the step, atomically and at most once per step id: a repeat for the same step
   * answers what the first call did, so a redelivered step is never charged twice.
   */
  debit(request: { organizationId: string; stepId: string; parts: number }): Promise<{ debited: boolean; balance: number }>;
}

export function contactsSmsBalance(client: PromiseClient<contactsV1.ContactsServiceClient>): SmsBalance {
  return {
    async debit(request) {
      const answer = await client.debitSmsBalance({ organizationId: request.organizationId, stepId: request.stepId, parts: request.parts });
      return { debited: answer.debited, balance: Number(answer.balance) };
    },
  };
}
