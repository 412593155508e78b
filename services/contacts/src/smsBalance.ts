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
 * One batch of debits in one statement (its own transaction), `$1..$4` = the debits' organization
 * ids, step ids, parts and the ids of their ledger lines, in arrival order. One row per debit, in
 * that order: whether its organization exists (`known`), the step's earlier entry (`prior…`), else
 * what this batch decided (`debited`, `balance` after it).
 *
 * - `locked` takes the organizations' row locks in id order (as every change of a balance does), so
 *   concurrent batches serialize and read each other's committed balance.
 * - `walk` decides the new debits of each organization one after another (a recursive step per
 *   debit): a debit is taken when the running balance covers it, else refused with the balance
 *   unchanged, and a later smaller one may still fit, as when each was applied alone.
 * - `updated` and `recorded` write the final balances and one ledger line per new debit (refusals
 *   included, delta 0). Data-modifying parts of one statement run once, whoever reads them.
 *
 * `prior` reads with the statement's snapshot, taken before the locks are waited for: a debit of the
 * same step committed meanwhile by another contacts replica is not seen, and the ledger's unique
 * step_id then fails this statement as a whole (nothing written), never a second debit. The batch is
 * then run again: the new statement sees that entry and answers it.
 */
const DEBIT_BATCH_SQL = `
WITH RECURSIVE
  input AS (
    SELECT t.organization_id, t.step_id, t.parts, t.ledger_id, t.ord
    FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::uuid[]) WITH ORDINALITY AS t(organization_id, step_id, parts, ledger_id, ord)
  ),
  locked AS (
    SELECT id, sms_balance FROM organizations WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
  ),
  prior AS (
    SELECT step_id, organization_id, debited, balance_after FROM sms_ledger WHERE step_id = ANY($2::text[])
  ),
  fresh AS (
    SELECT i.organization_id, i.step_id, i.parts, i.ledger_id, i.ord, row_number() OVER (PARTITION BY i.organization_id ORDER BY i.ord) AS n
    FROM input i JOIN locked l ON l.id = i.organization_id
    WHERE NOT EXISTS (SELECT 1 FROM prior p WHERE p.step_id = i.step_id)
  ),
  walk AS (
    SELECT l.id AS organization_id, 0::bigint AS n, l.sms_balance::bigint AS balance, NULL::boolean AS debited, NULL::bigint AS ord
    FROM locked l
    UNION ALL
    SELECT w.organization_id, f.n, CASE WHEN w.balance >= f.parts THEN w.balance - f.parts ELSE w.balance END, w.balance >= f.parts, f.ord
    FROM walk w JOIN fresh f ON f.organization_id = w.organization_id AND f.n = w.n + 1
  ),
  settled AS (
    SELECT DISTINCT ON (organization_id) organization_id, balance FROM walk ORDER BY organization_id, n DESC
  ),
  updated AS (
    UPDATE organizations o SET sms_balance = s.balance, updated_at = now()
    FROM settled s JOIN locked l ON l.id = s.organization_id
    WHERE o.id = s.organization_id AND s.balance <> l.sms_balance
  ),
  recorded AS (
    INSERT INTO sms_ledger (id, organization_id, kind, step_id, parts, delta, debited, balance_after, reason)
    SELECT f.ledger_id, f.organization_id, 'debit', f.step_id, f.parts, CASE WHEN w.debited THEN -f.parts ELSE 0 END, w.debited, w.balance,
           CASE WHEN w.debited THEN '' ELSE 'insufficient balance' END
    FROM walk w JOIN fresh f ON f.ord = w.ord
  )
SELECT (l.id IS NOT NULL) AS known, p.organization_id AS "priorOrganizationId", p.debited AS "priorDebited", p.balance_after AS "priorBalance", w.debited, w.balance
FROM input i
LEFT JOIN locked l ON l.id = i.organization_id
LEFT JOIN prior p ON p.step_id = i.step_id
LEFT JOIN walk w ON w.ord = i.ord
ORDER BY i.ord`;

/**
 * The SMS balance. Every change holds the organization's row lock, so concurrent debits serialize and
 * the balance can never go below zero; the ledger's unique step_id makes a debit idempotent.
 *
 * Debits arrive for the steps senders have in flight, all for the same few organizations, so one
 * transaction each made every SMS wait for the previous one's round trips under its organization's
 * lock. They are applied in batches instead (StatementBatcher: the debits that came in while the
 * previous batch was written), each batch by ONE statement (DEBIT_BATCH_SQL): it locks the
 * organizations' rows, reads the steps' earlier ledger entries, decides each new debit in arrival
 * order against the running balance, updates the balances and writes the ledger lines. Each debit
 * still gets its own answer (an unknown organization or a step id debited for another organization
 * fails that debit only), and a step id is never in one batch twice.
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

  private async debitBatch(batch: DebitInput[]): Promise<Array<DebitAnswer | { error: unknown }>> {
    const params = [
      sqlArray(batch.map((input) => input.organizationId), { bare: true }),
      sqlArray(batch.map((input) => input.stepId)),
      sqlArray(batch.map((input) => input.parts)),
      sqlArray(batch.map(() => uuidv7()), { bare: true }),
    ];
    type Row = { known: boolean; priorOrganizationId: string | null; priorDebited: boolean | null; priorBalance: string | null; debited: boolean | null; balance: string | null };
    let rows: Row[];
    for (let tries = 1; ; tries++) {
      // Named, so each connection plans the statement once: planning it on every batch was about half
      // of the backend's CPU per debit.
      try {
        ({ rows } = await this.pool.query<Row>({ name: 'contacts-debit-batch', text: DEBIT_BATCH_SQL, values: params }));
        break;
      } catch (err) {
        // Another replica's debit of one of these steps committed while this statement waited for the
        // locks (DEBIT_BATCH_SQL): nothing was written, and a new statement reads that entry.
        if (!isStepIdTaken(err) || tries >= 3) throw err;
      }
    }
    if (rows.length !== batch.length) throw new Error(`the debit batch answered ${rows.length} rows for ${batch.length} debits`);
    return batch.map((input, i): DebitAnswer | { error: unknown } => {
      const row = rows[i];
      if (!row.known) return { error: new NotFoundError(`organization ${input.organizationId}`) };
      if (row.priorOrganizationId !== null) {
        if (row.priorOrganizationId !== input.organizationId) return { error: new ConflictError('step_id_reused', `step ${input.stepId} was debited for another organization`) };
        return { debited: row.priorDebited!, balance: Number(row.priorBalance) };
      }
      return { debited: row.debited!, balance: Number(row.balance) };
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

/** A unique violation on the ledger's step_id. */
function isStepIdTaken(err: unknown): boolean {
  const pgErr = err as { code?: string; constraint?: string };
  return pgErr.code === '23505' && pgErr.constraint === 'sms_ledger_step_id_key';
}

async function lockBalance(client: PoolClient, organizationId: string): Promise<number> {
  const { rows } = await client.query<{ smsBalance: number }>('SELECT sms_balance AS "smsBalance" FROM organizations WHERE id = $1 FOR UPDATE', [organizationId]);
  return found(rows[0], `organization ${organizationId}`).smsBalance;
}
