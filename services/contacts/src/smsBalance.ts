import { ConflictError, inTransaction, InvalidError, isDomainError, NotFoundError, sqlArray, StatementBatcher, uuidv7, type DomainError, type Pool, type PoolClient } from '@rrs/runtime';
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
  await recordLedgerEntries(client, [entry]);
}

/** Writes ledger lines in one statement. */
async function recordLedgerEntries(client: PoolClient, entries: LedgerEntry[]): Promise<void> {
  await client.query(
    `INSERT INTO sms_ledger (id, organization_id, kind, step_id, parts, delta, debited, balance_after, reason)
     SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::boolean[], $8::bigint[], $9::text[])`,
    [
      sqlArray(entries.map(() => uuidv7()), { bare: true }),
      sqlArray(entries.map((entry) => entry.organizationId), { bare: true }),
      sqlArray(entries.map((entry) => entry.kind), { bare: true }),
      sqlArray(entries.map((entry) => entry.stepId ?? null)),
      sqlArray(entries.map((entry) => entry.parts)),
      sqlArray(entries.map((entry) => entry.delta)),
      sqlArray(entries.map((entry) => entry.debited ?? false)),
      sqlArray(entries.map((entry) => entry.balanceAfter)),
      sqlArray(entries.map((entry) => entry.reason ?? '')),
    ],
  );
}

/** Largest single debit or credit; an SMS of many parts is still far below it. */
export const MAX_PARTS_PER_ENTRY = 1_000_000;
/** Largest SMS balance an organization may hold; far above any real purchase, well below 2^53. */
export const MAX_SMS_BALANCE = 1_000_000_000;

function checkParts(errors: FieldErrors, parts: number): void {
  if (!Number.isSafeInteger(parts) || parts < 1 || parts > MAX_PARTS_PER_ENTRY) errors.add('/parts', `must be an integer from 1 to ${MAX_PARTS_PER_ENTRY}`);
}

/** Most debits one DebitSmsBalances call may carry (one batch of the balance's writes). */
export const MAX_DEBITS_PER_CALL = 500;

type DebitInput = { organizationId: string; stepId: string; parts: number };
type DebitAnswer = { debited: boolean; balance: number };

/**
 * The SMS balance. Every change holds the organization's row lock, so concurrent debits serialize and
 * the balance can never go below zero; the ledger's unique step_id makes a debit idempotent.
 *
 * Debits arrive one gRPC call per SMS, all for the same few organizations, so one transaction each
 * made every SMS wait for the previous one's six round trips under its organization's lock. They are
 * applied in batches instead (StatementBatcher: the calls that came in while the previous batch was
 * written), one transaction per batch: the organizations' rows locked in id order, the steps'
 * earlier ledger entries read, each debit decided in arrival order against the running balance, then
 * one UPDATE of the balances and one INSERT of the ledger lines. Each call still gets its own answer
 * (an unknown organization or a step id debited for another organization fails that call only),
 * and a step id is never in one batch twice.
 */
export class SmsBalance {
  private readonly debits: StatementBatcher<DebitInput, DebitAnswer | { error: unknown }>;

  constructor(private readonly pool: Pool) {
    this.debits = new StatementBatcher((batch) => this.debitBatch(batch), { key: (input) => input.stepId, maxBatch: 500 });
  }

  async debit(input: DebitInput): Promise<DebitAnswer> {
    asUuid(input.organizationId, 'organization');
    const errors = new FieldErrors();
    if (input.stepId === '' || input.stepId.length > 200) errors.add('/stepId', 'must be 1 to 200 characters');
    checkParts(errors, input.parts);
    errors.throwIfAny();
    const answer = await this.debits.submit({ organizationId: input.organizationId, stepId: input.stepId, parts: input.parts });
    if ('error' in answer) throw answer.error;
    return answer;
  }

  /**
   * Several debits at once (DebitSmsBalances, a sender's steps in flight): each is checked and applied
   * as `debit` applies it, so they join the same batches, and a debit's domain error (a bad request, an
   * unknown organization, a step id debited for another organization) is its own answer. Any other
   * failure (the database) fails the whole call: a batch is one transaction, and every debit is
   * idempotent, so the caller may send them all again.
   */
  async debitEach(inputs: DebitInput[]): Promise<Array<DebitAnswer | DomainError>> {
    if (inputs.length < 1 || inputs.length > MAX_DEBITS_PER_CALL) throw new InvalidError([{ pointer: '/debits', detail: `must hold 1 to ${MAX_DEBITS_PER_CALL} debits` }]);
    const stepIds = new Set<string>();
    const errors = new FieldErrors();
    inputs.forEach((input, i) => {
      if (stepIds.has(input.stepId)) errors.add(`/debits/${i}/stepId`, 'must not repeat a step id of the same call');
      stepIds.add(input.stepId);
    });
    errors.throwIfAny();
    const settled = await Promise.allSettled(inputs.map((input) => this.debit(input)));
    return settled.map((outcome) => {
      if (outcome.status === 'fulfilled') return outcome.value;
      if (isDomainError(outcome.reason) && outcome.reason.kind !== 'internal') return outcome.reason;
      throw outcome.reason;
    });
  }

  private debitBatch(batch: DebitInput[]): Promise<Array<DebitAnswer | { error: unknown }>> {
    return inTransaction(this.pool, async (client) => {
      const organizationIds = [...new Set(batch.map((input) => input.organizationId))].sort();
      const { rows: organizations } = await client.query<{ id: string; smsBalance: string | number }>(
        'SELECT id, sms_balance AS "smsBalance" FROM organizations WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE',
        [sqlArray(organizationIds, { bare: true })],
      );
      const balances = new Map(organizations.map((row) => [row.id, Number(row.smsBalance)]));
      const { rows: prior } = await client.query<{ stepId: string; organizationId: string; debited: boolean; balanceAfter: string | number }>(
        'SELECT step_id AS "stepId", organization_id AS "organizationId", debited, balance_after AS "balanceAfter" FROM sms_ledger WHERE step_id = ANY($1::text[])',
        [sqlArray(batch.map((input) => input.stepId))],
      );
      const priorOf = new Map(prior.map((row) => [row.stepId, row]));
      const entries: LedgerEntry[] = [];
      const answers = batch.map((input): DebitAnswer | { error: unknown } => {
        const balance = balances.get(input.organizationId);
        if (balance === undefined) return { error: new NotFoundError(`organization ${input.organizationId}`) };
        const earlier = priorOf.get(input.stepId);
        if (earlier) {
          if (earlier.organizationId !== input.organizationId) return { error: new ConflictError('step_id_reused', `step ${input.stepId} was debited for another organization`) };
          return { debited: earlier.debited, balance: Number(earlier.balanceAfter) };
        }
        const debited = balance >= input.parts;
        const after = debited ? balance - input.parts : balance;
        balances.set(input.organizationId, after);
        entries.push({
          organizationId: input.organizationId, kind: 'debit', stepId: input.stepId, parts: input.parts,
          delta: debited ? -input.parts : 0, debited, balanceAfter: after, reason: debited ? '' : 'insufficient balance',
        });
        return { debited, balance: after };
      });
      if (entries.length > 0) {
        const changed = organizations.filter((row) => balances.get(row.id) !== Number(row.smsBalance));
        if (changed.length > 0) {
          await client.query(
            `UPDATE organizations SET sms_balance = u.balance, updated_at = now()
             FROM unnest($1::uuid[], $2::bigint[]) AS u(id, balance) WHERE organizations.id = u.id`,
            [sqlArray(changed.map((row) => row.id), { bare: true }), sqlArray(changed.map((row) => balances.get(row.id)!))],
          );
        }
        await recordLedgerEntries(client, entries);
      }
      return answers;
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
