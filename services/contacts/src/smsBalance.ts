import { AppError, inTransaction, uuidv7, type Pool, type PoolClient } from '@rrs/runtime';
import { asUuid, checkText, FieldErrors } from './validation';

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
export async function recordLedgerEntry(client: PoolClient, e: LedgerEntry): Promise<void> {
  await client.query(
    `INSERT INTO sms_ledger (id, organization_id, kind, step_id, parts, delta, debited, balance_after, reason)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [uuidv7(), e.organizationId, e.kind, e.stepId ?? null, e.parts, e.delta, e.debited ?? false, e.balanceAfter, e.reason ?? ''],
  );
}

/** Largest single debit or credit; an SMS of many parts is still far below it. */
export const MAX_PARTS_PER_ENTRY = 1_000_000;
const MAX_BALANCE = 1_000_000_000;

/**
 * The SMS balance. Every change holds the organization's row lock, so concurrent debits serialize and
 * the balance can never go below zero; the ledger's unique step_id makes a debit idempotent.
 */
export class SmsBalance {
  constructor(private readonly pool: Pool) {}

  async debit(input: { organizationId: string; stepId: string; parts: number }): Promise<{ debited: boolean; balance: number }> {
    asUuid(input.organizationId, 'organization');
    const f = new FieldErrors();
    if (input.stepId === '' || input.stepId.length > 200) f.add('/stepId', 'must be 1 to 200 characters');
    if (!Number.isSafeInteger(input.parts) || input.parts < 1 || input.parts > MAX_PARTS_PER_ENTRY) f.add('/parts', `must be an integer from 1 to ${MAX_PARTS_PER_ENTRY}`);
    f.throwIfAny();
    return inTransaction(this.pool, async (client) => {
      const balance = await lockBalance(client, input.organizationId);
      const { rows: prior } = await client.query<{ organizationId: string; debited: boolean; balanceAfter: number }>(
        'SELECT organization_id AS "organizationId", debited, balance_after AS "balanceAfter" FROM sms_ledger WHERE step_id = $1',
        [input.stepId],
      );
      if (prior[0]) {
        if (prior[0].organizationId !== input.organizationId) throw new AppError(409, 'step_id_reused', `step ${input.stepId} was debited for another organization`);
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
    const f = new FieldErrors();
    if (!Number.isSafeInteger(input.parts) || input.parts < 1 || input.parts > MAX_PARTS_PER_ENTRY) f.add('/parts', `must be an integer from 1 to ${MAX_PARTS_PER_ENTRY}`);
    if (input.reason) checkText(f, '/reason', input.reason, { max: 500 });
    f.throwIfAny();
    return inTransaction(this.pool, async (client) => {
      const balance = await lockBalance(client, input.organizationId);
      const after = balance + input.parts;
      if (after > MAX_BALANCE) throw new AppError(400, 'invalid_request', `the balance may not exceed ${MAX_BALANCE} parts`, { details: { errors: [{ pointer: '/parts', detail: `the balance would exceed ${MAX_BALANCE}` }] } });
      await client.query('UPDATE organizations SET sms_balance = $2, updated_at = now() WHERE id = $1', [input.organizationId, after]);
      await recordLedgerEntry(client, { organizationId: input.organizationId, kind: 'credit', parts: input.parts, delta: input.parts, balanceAfter: after, reason: input.reason ?? '' });
      return { balance: after };
    });
  }
}

async function lockBalance(client: PoolClient, organizationId: string): Promise<number> {
  const { rows } = await client.query<{ smsBalance: number }>('SELECT sms_balance AS "smsBalance" FROM organizations WHERE id = $1 FOR UPDATE', [organizationId]);
  if (!rows[0]) throw new AppError(404, 'not_found', `organization ${organizationId} not found`);
  return rows[0].smsBalance;
}
