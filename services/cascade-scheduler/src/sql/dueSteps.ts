import { queryEach, sqlArray, type Pool, type PoolClient } from '@rrs/runtime';
import { earliestStatement, msUntilEarliest } from './msUntilEarliest';

export interface ClaimedStep {
  stepId: string;
  recipientId: string;
  /** A bulk request's step (fairShare.ts): published on its channel's bulk subject. */
  bulk: boolean;
}

/**
 * How many steps of a channel may be in flight (dispatched, no result yet): enough for `targetMs` of the
 * channel's current pace, between `min` and `max`. A channel's pace is read off its steps in flight
 * (Little's law: n in flight whose median has waited m have a turnaround of about 2m, so n / 2m a
 * second), so the bound follows the senders and the provider as they speed up or slow down, whatever the
 * replicas, and a step claimed now waits about `targetMs` behind the ones in flight, not for a backlog.
 *
 * A claim adds at most `min` steps to a channel. Steps claimed at one instant all have one age, which says
 * nothing of the pace: a channel with nothing in flight, or only steps claimed a moment ago, would read as
 * infinitely fast, and two claimers each took a whole batch into it (1 000 steps at once, 0.5–1 s of
 * sending that every other organization's next step then waited behind). Added a window at a time, the
 * steps in flight have ages spread over their turnaround, which is what the estimate needs.
 */
export interface InFlightBound {
  max: number;
  min: number;
  targetMs: number;
  /**
   * Steps of small requests may go over the bound by this many (0 when absent): their own lane, counted
   * off the small requests' steps in flight alone. The fair claim takes due small steps within the
   * channel's room as any, and past it while fewer than this many small steps are in flight, whatever the
   * bulk's (which may be over the bound while results are applied late); bulk steps only within the
   * room. A small organization's order waits for no one's bulk to drain, and the queue past PostgreSQL
   * stays bounded (the bound plus this; two claim loops, which do not see each other's uncommitted small
   * steps, may take this twice for a moment).
   */
  smallHeadroom?: number;
}

export interface ClaimOptions {
  /** Up to this many steps. */
  limit: number;
  /**
   * Steps this process claimed in rounds not committed yet: the in-flight count the claim reads (what is
   * committed) does not see them yet, so they come off every channel's room.
   */
  uncommitted?: number;
  /** Steps of one channel dispatched and still without a result, at most (null: no bound). */
  inFlight: InFlightBound | null;
  /** The fair path (round-robin over queues) instead of straight due order. */
  fair: boolean;
}

export interface Claim {
  now: Date;
  claimed: ClaimedStep[];
  /**
   * A channel's in-flight bound cut the claim: more of its steps were due than its room, less than
   * `limit` (so due work waits in PostgreSQL beyond this claim).
   */
  limited: boolean;
}

/**
 * Each channel's room under its in-flight bound (InFlightBound), counted off the in-flight index: at
 * most the bound plus a batch per channel, less the steps claimed by this process and not yet committed
 * (`$5`). A channel with nothing in flight has the whole `max`, of which a claim takes at most `min`.
 */
const FLIGHT = `flight AS MATERIALIZED (
       SELECT sent_channel,
              least($2::int, greatest($3::int, (count(*) * $4::float8 / greatest(2000 * extract(epoch FROM clock.now - percentile_disc(0.5) WITHIN GROUP (ORDER BY dispatched_at)), 1))::int))
                - count(*)::int - $5::int AS room,
              count(*) FILTER (WHERE NOT bulk)::int AS small_in_flight
         FROM recipient_steps CROSS JOIN clock WHERE status = 'dispatched' GROUP BY sent_channel, clock.now)`;

/**
 * Straight due order off the due index, locking each as it is read (SKIP LOCKED: a second claimer
 * reads past them, so replicas share the work and none dispatches a step twice). With an in-flight
 * bound, at most the room of the fullest channel, so no channel goes over it.
 */
function dueOrderClaim(bounded: boolean): string {
  const room = bounded ? `(SELECT least($1::int, $3::int, greatest(0, coalesce(min(room), $2::int - $5::int))) FROM flight)` : '$1::int';
  return `WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now)${bounded ? `, ${FLIGHT}` : ''},
       take AS MATERIALIZED (SELECT ${room} AS n)
     SELECT clock.now, take.n AS room, s.id AS "stepId", s.recipient_id AS "recipientId", s.bulk
       FROM clock CROSS JOIN take LEFT JOIN LATERAL (
         SELECT id, recipient_id, bulk FROM recipient_steps
          WHERE status = 'scheduled' AND due_at <= clock.now
          ORDER BY due_at LIMIT take.n
          FOR UPDATE SKIP LOCKED) s ON true`;
}

/**
 * Round-robin over the queues — (organization, channel) pairs with scheduled steps — with each channel's
 * room: every queue's first due step, then every queue's second, … (oldest first within a turn); within
 * a queue small requests before bulk, each in due order. Small requests' steps also have their lane
 * past the bound (`$6`, InFlightBound.smallHeadroom, less the small steps in flight): past the channel's
 * room, small candidates are kept while they number at most those kept within the room plus the lane.
 * One candidate past each queue's room tells whether the bound cut the claim (`limited`).
 *
 * The sections — (organization, channel, small or bulk) — are found by a skip-scan of the queue index
 * (one probe per section, not per step) that also returns each section's first scheduled step's due
 * time, and each section's candidates are then read from that due time on. The index is partial
 * (`status = 'scheduled'`), but a dispatched step's entry stays in it until VACUUM, so in front of each
 * section's first live entry lie the entries of the steps dispatched since the last vacuum: the
 * skip-scan walks that dead prefix once, and the candidates' read starts past it (reading it again per
 * section and per probe made a claim's cost grow with the steps sent since the last vacuum). The
 * section's candidates are read from the row comparison `(bulk, due_at) >= (…, first live due time)`
 * after equalities on the index's first two columns: that is what B-tree positioning starts from (with
 * `bulk = …` as an equality beside it, the equality is what positions, at the section's first entry,
 * dead prefix and all), and what the due index cannot serve (a plain `due_at` range let the planner
 * read every organization's due steps from that time off the due index instead). The small section's
 * read ends where the bulk one begins (`bulk <= false`, a bound on a column behind equalities, which
 * ends a B-tree scan), and a section with no live entry is not read (a NULL in the row comparison
 * would compare on `bulk` alone). The read takes the room's worth of entries and only then keeps those
 * that are due: within a section the due entries come first, so this is exactly its due steps up to the
 * room. A due-time bound inside the read would not end it (PostgreSQL 15 ends a B-tree scan neither on
 * a row comparison nor on a column whose predecessor has no equality), and with fewer steps due than
 * the room it went on through every future step of the section (at 1 M future steps ~8 000 pages,
 * 350–500 ms a claim). The condition outside stays outside: PostgreSQL does not push it into a
 * subquery with a LIMIT.
 *
 * The candidates are read unlocked, then locked in that order (a nested loop over the materialized,
 * sorted candidates: the limit stops the locking) with SKIP LOCKED (a step another claimer holds is
 * passed over), up to the limit. Each is locked by its key and its status checked on the locked row:
 * with `status = 'scheduled'` beside the key, a planner whose statistics see few scheduled steps among
 * millions of finished ones (any long history) walks the partial queue index for every candidate
 * instead — the whole backlog per step claimed. (`LIMIT 1` keeps the status check out of the lookup:
 * PostgreSQL pushes an outer condition into a locking subquery unless it has a LIMIT.) The section
 * probes name the queue index's whole order, which only that index gives without a sort.
 */
function fairClaim(bounded: boolean): string {
  const room = bounded ? `least($1::int, $3::int, coalesce(f.room, $2::int - $5::int))` : '$1::int';
  // The small requests' lane past the bound: the headroom less their own steps in flight, whatever the bulk's.
  const lane = bounded ? '$6::int - coalesce(f.small_in_flight, 0)' : '0';
  const smallRoom = 'greatest(o.room, 0) + greatest(o.lane, 0)';
  const kept = bounded
    ? 'nth <= room OR (NOT bulk AND small_nth <= count(*) FILTER (WHERE NOT bulk AND nth <= room) OVER (PARTITION BY sent_channel) + lane)'
    : 'nth <= room';
  return `WITH RECURSIVE clock AS MATERIALIZED (SELECT clock_timestamp() AS now)${bounded ? `, ${FLIGHT}` : ''},
       sections AS (
         (SELECT organization_id, sent_channel, bulk, due_at FROM recipient_steps WHERE status = 'scheduled' ORDER BY organization_id, sent_channel, bulk, due_at LIMIT 1)
         UNION ALL
         SELECT n.organization_id, n.sent_channel, n.bulk, n.due_at FROM sections q CROSS JOIN LATERAL (
           SELECT organization_id, sent_channel, bulk, due_at FROM recipient_steps
            WHERE status = 'scheduled' AND (organization_id, sent_channel, bulk) > (q.organization_id, q.sent_channel, q.bulk)
            ORDER BY organization_id, sent_channel, bulk, due_at LIMIT 1) n),
       open AS MATERIALIZED (
         SELECT q.organization_id, q.sent_channel, ${room} AS room, ${lane} AS lane,
                min(q.due_at) FILTER (WHERE NOT q.bulk) AS small_from, min(q.due_at) FILTER (WHERE q.bulk) AS bulk_from
           FROM sections q${bounded ? ' LEFT JOIN flight f USING (sent_channel)' : ''}
          GROUP BY q.organization_id, q.sent_channel${bounded ? ', f.room, f.small_in_flight' : ''}),
       candidates AS (
         SELECT c.id, c.recipient_id, c.due_at, c.bulk, o.sent_channel, o.room, o.lane,
                row_number() OVER (PARTITION BY o.organization_id, o.sent_channel ORDER BY c.bulk, c.due_at) AS turn
           FROM open o CROSS JOIN clock CROSS JOIN LATERAL (
             (SELECT s.* FROM (SELECT id, recipient_id, bulk, due_at FROM recipient_steps
               WHERE organization_id = o.organization_id AND sent_channel = o.sent_channel AND status = 'scheduled'
                 AND (bulk, due_at) >= (false, o.small_from) AND bulk <= false AND o.small_from IS NOT NULL
               ORDER BY organization_id, sent_channel, bulk, due_at LIMIT ${smallRoom} + 1) s
               WHERE s.due_at <= clock.now)
             UNION ALL
             (SELECT s.* FROM (SELECT id, recipient_id, bulk, due_at FROM recipient_steps
               WHERE organization_id = o.organization_id AND sent_channel = o.sent_channel AND status = 'scheduled'
                 AND (bulk, due_at) >= (true, o.bulk_from) AND o.bulk_from IS NOT NULL
               ORDER BY organization_id, sent_channel, bulk, due_at LIMIT greatest(o.room, 0) + 1) s
               WHERE s.due_at <= clock.now)
             LIMIT ${smallRoom} + 1) c),
       ranked AS (
         SELECT id, sent_channel, turn, due_at, bulk, room, lane, row_number() OVER w AS nth, count(*) FILTER (WHERE NOT bulk) OVER w AS small_nth
           FROM candidates WINDOW w AS (PARTITION BY sent_channel ORDER BY turn, due_at ROWS UNBOUNDED PRECEDING)),
       kept AS (
         SELECT id, turn, due_at, room, ${kept} AS kept FROM ranked),
       fair AS MATERIALIZED (
         SELECT id FROM kept WHERE kept ORDER BY turn, due_at LIMIT 2 * $1::int)
     SELECT clock.now, ${bounded ? `EXISTS (SELECT 1 FROM kept WHERE NOT kept AND room < $1::int)` : 'false'} AS limited, s.id AS "stepId", s.recipient_id AS "recipientId", s.bulk
       FROM clock LEFT JOIN LATERAL (
         SELECT l.id, l.recipient_id, l.bulk FROM fair CROSS JOIN LATERAL (
           SELECT id, recipient_id, bulk, status FROM recipient_steps WHERE id = fair.id LIMIT 1 FOR UPDATE SKIP LOCKED) l
          WHERE l.status = 'scheduled'
          LIMIT $1::int) s ON true`;
}

const CLAIMS = {
  dueOrder: { bounded: dueOrderClaim(true), unbounded: dueOrderClaim(false) },
  fair: { bounded: fairClaim(true), unbounded: fairClaim(false) },
};

/** The claim's statement and parameters for these options (exported for the tests that read its plan). */
export function claimStatement(options: ClaimOptions): { text: string; values: unknown[] } {
  const claims = options.fair ? CLAIMS.fair : CLAIMS.dueOrder;
  const bound = options.inFlight;
  return bound
    ? { text: claims.bounded, values: [options.limit, bound.max, Math.min(bound.min, bound.max), bound.targetMs, options.uncommitted ?? 0, ...(options.fair ? [bound.smallHeadroom ?? 0] : [])] }
    : { text: claims.unbounded, values: [options.limit] };
}

/**
 * The planner settings a claim runs under, set for the claim alone (`SET LOCAL` before it, back to the
 * defaults after it, in the same request): it reads through indexes only — no bitmap scan, no sequential
 * scan. The steps in flight (FLIGHT) are read off the in-flight index, which keeps an entry for every step
 * dispatched since the last vacuum (a step's status is in the index's predicate, so each move dispatched →
 * sent leaves one behind). A plain index scan marks each such entry dead the first time it meets it (once
 * no transaction can still see the row), and the next claims pass it in the index page; a bitmap scan
 * never marks one, so every claim read the heap page of every step sent since the last vacuum — 800–2 800
 * blocks and 12–20 ms a claim 20 000–40 000 steps after one (bench/fairness.mjs, all-in-one), the claim's
 * cost growing with the send. The planner chose the bitmap scan as soon as the statistics counted a few
 * hundred steps in flight, and would choose a sequential scan of the whole table over an index scan on a
 * small table or a larger count. The claim's other reads are by key or by queue, index scans either way.
 *
 * And no sort where an index gives the order: each section's candidates are read off the queue index in
 * its order (fairClaim), and the due index, read whole with the section as a filter and then sorted, is
 * the same rows to a planner that believes few steps are scheduled — statistics taken while the table was
 * idle between two sends, which a bulk arriving later does not change until the next ANALYZE. With them
 * the planner took the due index: every claim of a 100 000 send read every due step's row and sorted them
 * (4 400 blocks and 35–40 ms a claim, against 1.3 ms; bench/fairness.mjs at 100 000, A beside B ×0.56 of
 * A alone). The claim's other sorts (its window functions, its turns' order) have no sort-free plan, so
 * they are chosen as before.
 *
 * And no JIT: a disabled plan type is costed, not removed — each sort the claim cannot avoid adds 10¹⁰
 * to its cost, far past `jit_above_cost`, and on a connection with JIT on (PostgreSQL's default; the
 * scheduler's own pools turn it off, SESSION_SETTINGS) every claim compiled itself first: ~500 ms
 * for a 1 ms claim.
 */
const CLAIM_PLANNER_OFF = ['enable_bitmapscan', 'enable_seqscan', 'enable_sort', 'jit'] as const;
export const CLAIM_PLANNER_SETTINGS = {
  before: CLAIM_PLANNER_OFF.map((setting) => `SET LOCAL ${setting} = off`),
  after: CLAIM_PLANNER_OFF.map((setting) => `SET LOCAL ${setting} TO DEFAULT`),
} as const;

/**
 * Reads the database clock and claims up to `limit` steps due at that time (see dueOrderClaim and
 * fairClaim), in one statement under CLAIM_PLANNER_SETTINGS (in the same request on a client of
 * `inCoalescedTransaction`; `SET LOCAL` takes effect only inside a transaction). Never waits for a lock.
 */
export async function claimDueSteps(client: PoolClient, options: ClaimOptions): Promise<Claim> {
  const { text, values } = claimStatement(options);
  const { before, after } = CLAIM_PLANNER_SETTINGS;
  const results = await queryEach(client, [...before.map((setting) => ({ text: setting })), { text, values }, ...after.map((setting) => ({ text: setting }))]);
  const result = results[before.length];
  const rows = result.rows as Array<{ now: Date; limited?: boolean; room?: number; stepId: string | null; recipientId: string | null; bulk: boolean | null }>;
  const claimed: ClaimedStep[] = [];
  for (const row of rows) if (row.stepId !== null && row.recipientId !== null) claimed.push({ stepId: row.stepId, recipientId: row.recipientId, bulk: row.bulk === true });
  // Due order: the bound cut the claim when it took all the room it had, less than a batch.
  const { now, limited, room } = rows[0];
  return { now, claimed, limited: room === undefined ? Boolean(limited) : room < options.limit && claimed.length >= room };
}

/** Until the nearest scheduled step is due (one `min()` over the due index). */
export function msUntilNextDueStep(pool: Pool): Promise<number | null> {
  return msUntilEarliest(pool, 'due_at', 'recipient_steps', `status = 'scheduled'`);
}

/** `msUntilNextDueStep`'s read as a statement: a dispatch round sends it after its COMMIT (`readAfterCommit`). */
export const NEXT_DUE_STEP = earliestStatement('due_at', 'recipient_steps', `status = 'scheduled'`);

/** The channels of steps dispatched before `before` that still have no result. */
export async function channelsWithTimedOutSteps(db: Pool | PoolClient, before: Date): Promise<string[]> {
  const { rows } = await db.query<{ sent_channel: string }>(
    `SELECT DISTINCT sent_channel FROM recipient_steps WHERE status = 'dispatched' AND dispatched_at <= $1`,
    [before],
  );
  return rows.map((row) => row.sent_channel);
}

/**
 * Claims up to `limit` steps dispatched at or before `before` that still have no result (`except` those
 * whose result is on its way), with their recipients (SKIP LOCKED like the dispatcher, so replicas never
 * act twice), counting one more result timeout on each.
 */
export async function claimTimedOutSteps(client: PoolClient, before: Date, limit: number, channels: string[], except: string[] = []): Promise<Array<ClaimedStep & { timeouts: number }>> {
  const { rows: due } = await client.query<ClaimedStep>(
    `SELECT s.id AS "stepId", s.recipient_id AS "recipientId", s.bulk
       FROM recipient_steps s JOIN recipients r ON r.id = s.recipient_id
      WHERE s.status = 'dispatched' AND s.dispatched_at <= $1 AND s.sent_channel = ANY($3::text[]) AND NOT s.id = ANY($4::uuid[])
      ORDER BY s.dispatched_at LIMIT $2
      FOR UPDATE OF s, r SKIP LOCKED`,
    [before, limit, sqlArray(channels), sqlArray(except, { bare: true })],
  );
  if (due.length === 0) return [];
  const { rows: counted } = await client.query<{ id: string; result_timeouts: number }>(
    'UPDATE recipient_steps SET result_timeouts = result_timeouts + 1 WHERE id = ANY($1::uuid[]) RETURNING id, result_timeouts',
    [due.map((step) => step.stepId)],
  );
  const timeouts = new Map(counted.map((row) => [row.id, row.result_timeouts]));
  return due.map((step) => ({ ...step, timeouts: timeouts.get(step.stepId) ?? 0 }));
}
