import { ConflictError, inTransaction, InvalidError, uuidv7, type Pool, type PoolClient } from '@rrs/runtime';
import { asUuid, checkText, FieldErrors, found } from './validation';

export type LedgerKind = 'initial' | 'credit' | 'adjustment' | 'debit';

export interface LedgerEntry {
  organizationId: string;
  kind: LedgerKind;
  parts: number;
  delta: number;
  balanceAfter: number;
  stepId?: string;
  debited?: boolean;
  reason?: string;
}

/** Writes one ledger line; the caller updates organizations.sms_balance in the same transaction. */
export async function recordLedgerEntry(client: PoolClient, entry: LedgerEntry): Promise<void> {
  await client.query(
    `INSERT INTO sms_ledger (id, organization_id, kind, step_id, parts, delta, debited, balance_after, reason)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [uuidv7(), entry.organizationId, entry.kind, entry.stepId ?? null, entry.parts, entry.delta, entry.debited ?? false, entry.balanceAfter, entry.reason ?? ''],
  );
}

/** Largest single debit or credit; an SMS of many parts is still far below it. */
export const MAX_PARTS_PER_ENTRY = 1_000_000;
/** Largest SMS balance an organization may hold; far above any real purchase, well below 2^53. */
export const MAX_SMS_BALANCE = 1_000_000_000;

function checkParts(errors: FieldErrors, parts: number): void {
  if (!Number.isSafeInteger(parts) || parts < 1 || parts > MAX_PARTS_PER_ENTRY) errors.add('/parts', `must be an integer from 1 to ${MAX_PARTS_PER_ENTRY}`);
}

/**
 * The SMS balance. Every change holds the organization's row lock, so concurrent debits serialize and
 * the balance can never go below zero; the ledger's unique step_id makes a debit idempotent.
 */
export class SmsBalance {
  constructor(private readonly pool: Pool) {}

  async debit(input: { organizationId: string; stepId: string; parts: number }): Promise<{ debited: boolean; balance: number }> {
    asUuid(input.organizationId, 'organization');
    const errors = new FieldErrors();
    if (input.stepId === '' || input.stepId.length > 200) errors.add('/stepId', 'must be 1 to 200 characters');
    checkParts(errors, input.parts);
    errors.throwIfAny();
    return inTransaction(this.pool, async (client) => {
      const balance = await lockBalance(client, input.organizationId);
      const { rows: prior } = await client.query<{ organizationId: string; debited: boolean; balanceAfter: number }>(
        'SELECT organization_id AS "organizationId", debited, balance_after AS "balanceAfter" FROM sms_ledger WHERE step_id = $1',
        [input.stepId],
      );
      if (prior[0]) {
        if (prior[0].organizationId !== input.organizationId) throw new ConflictError('step_id_reused', `step ${input.stepId} was debited for another organization`);
        return { debited: prior[0].debited, balance: prior[0].balanceAfter };
      }
      const debited = balance >= input.parts;
      const after = debited ? balance - input.parts : balance;
      if (debited) await client.query('UPDATE organizations SET sms_balance = $2, updated_at = now() WHERE id = $1', [input.organizationId, after]);
      await recordLedgerEntry(client, {
        organizationId: input.organizationId, kind: 'debit', stepId: input.stepId, parts: input.parts,
        delta: debited ? -input.parts : 0, debited, balanceAfter: after, reason: debited ? '' : 'insufficient balance',
      });
      return { debited, balance: after };
    });
  }

  async credit(input: { organizationId: string; parts: number; reason?: string }): Promise<{ balance: number }> {
    asUuid(input.organizationId, 'organization');
    const errors = new FieldErrors();
    checkParts(errors, input.parts);
    if (input.reason) checkText(errors, '/reason', input.reason, { max: 500 });
    errors.throwIfAny();
    return inTransaction(this.pool, async (client) => {
      const balance = await lockBalance(client, input.organizationId);
      const after = balance + input.parts;
      if (after > MAX_SMS_BALANCE) {
        throw new InvalidError([{ pointer: '/parts', detail: `the balance would exceed ${MAX_SMS_BALANCE}` }], { message: `the balance may not exceed ${MAX_SMS_BALANCE} parts` });
      }
      await client.query('UPDATE organizations SET sms_balance = $2, updated_at = now() WHERE id = $1', [input.organizationId, after]);
      await recordLedgerEntry(client, { organizationId: input.organizationId, kind: 'credit', parts: input.parts, delta: input.parts, balanceAfter: after, reason: input.reason ?? '' });
      return { balance: after };
    });
  }
}

async function lockBalance(client: PoolClient, organizationId: string): Promise<number> {
  const { rows } = await client.query<{ smsBalance: number }>('SELECT sms_balance AS "smsBalance" FROM organizations WHERE id = $1 FOR UPDATE', [organizationId]);
  return found(rows[0], `organization ${organizationId}`).smsBalance;
}
