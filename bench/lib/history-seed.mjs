// The finished history bench/history.mjs and bench/read-cascade.mjs seed: cascades of 3 recipients, 3
// sent steps each (EMAIL, SMS, EMAIL), 20 % rated, spread over a year and two weeks, in chunks of one
// statement per CHUNK recipients so memory stays bounded; with `sendLogs`, the senders' send logs too
// (their schemas must be migrated first).
const CHUNK = 300_000;

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * A review-link token as the service makes them (services/cascade-scheduler/src/ids.ts tokenBatch):
 * the minute it was made, 4 base62 characters of the minutes since 2024-01-01 UTC, then 18 random ones
 * (here md5's hex, a subset of base62: where a token sorts in the unique index is what the history
 * changes, and that is the minute).
 */
function tokenSql(at, seed) {
  const minutes = `floor(extract(epoch FROM ${at} - timestamptz '2024-01-01 00:00:00+00') / 60)::bigint`;
  const digit = (divisor) => `substr('${BASE62}', ((${minutes} / ${divisor}) % 62)::int + 1, 1)`;
  return `${digit(62 ** 3)} || ${digit(62 ** 2)} || ${digit(62)} || ${digit(1)} || substr(md5(${seed}), 1, 18)`;
}

/** The finished history of one year and two weeks for `organizationId`: cascades of 3 recipients, 3 sent steps each, 20 % rated. */
export async function seedHistory(db, organizationId, locationId, total, { sendLogs = true } = {}) {
  const cascades = Math.ceil(total / 3);
  for (let from = 0; from < cascades; from += CHUNK / 3) {
    const to = Math.min(cascades, from + CHUNK / 3) - 1;
    await db.query(
      `WITH c AS (
         INSERT INTO cascades (id, organization_id, location_id, status, recipients_total, active_recipients, created_at, finished_at)
         SELECT gen_random_uuid(), $1::uuid, $2, 'finished', 3, 0, t, t + interval '2 days'
           FROM (SELECT g, now() - interval '380 days' + g * (interval '378 days' / $5) AS t FROM generate_series($3::int, $4::int) g) s RETURNING id, created_at),
       r AS (
         INSERT INTO recipients (id, cascade_id, organization_id, position, name, email, phone, status, finish_reason, finished_at, review_request_id, rating)
         SELECT gen_random_uuid(), c.id, $1::uuid, p, 'Seeded Person', 'seed' || md5(c.id::text || p) || '@example.com', '+7900' || lpad((abs(hashtext(c.id::text || p)) % 10000000)::text, 7, '0'),
                'finished', CASE WHEN random() < 0.2 THEN 'rated' ELSE 'exhausted' END, c.created_at + interval '2 days', gen_random_uuid(), NULL
           FROM c, generate_series(0, 2) p RETURNING id, cascade_id, review_request_id, finish_reason, finished_at, phone),
       rr AS (
         INSERT INTO review_requests (id, organization_id, token, location_id, recipient_id, status, rated_at, created_at)
         SELECT r.review_request_id, $1::uuid, ${tokenSql("r.finished_at - interval '2 days'", 'r.review_request_id::text')}, $2, r.id, CASE WHEN r.finish_reason = 'rated' THEN 'rated' ELSE 'created' END,
                CASE WHEN r.finish_reason = 'rated' THEN r.finished_at END, r.finished_at - interval '2 days' FROM r RETURNING id, rated_at),
       ra AS (
         INSERT INTO ratings (review_request_id, organization_id, rating, created_at)
         SELECT id, $1::uuid, 1 + (abs(hashtext(id::text)) % 5), rated_at FROM rr WHERE rated_at IS NOT NULL RETURNING 1),
       st AS (
         INSERT INTO recipient_steps (id, recipient_id, cascade_id, organization_id, step_order, channel, delay_minutes, status, sent_channel, attempt, sent_at, delivered_at)
         SELECT gen_random_uuid(), r.id, r.cascade_id, $1::uuid, s, CASE WHEN s = 1 THEN 'SMS' ELSE 'EMAIL' END, s * 60, 'sent', CASE WHEN s = 1 THEN 'SMS' ELSE 'EMAIL' END, 1,
                r.finished_at - interval '2 days' + s * interval '1 hour', r.finished_at - interval '2 days' + s * interval '1 hour'
           FROM r, generate_series(0, 2) s RETURNING id, recipient_id, sent_channel, sent_at)${sendLogs ? `,
       -- The senders' send logs, one row per sent step, as sendLog.ts leaves it: claimed at the send
       -- (created_at), done with the provider's message id; the SMS sender also keeps the number and parts.
       em AS (
         INSERT INTO channel_email.send_log (step_id, attempt_id, channel, organization_id, state, lease_until, attempts, outcome, provider_message_id, parts, provider, created_at, updated_at)
         SELECT st.id::text, st.id || ':1', 'EMAIL', $1, 'done', st.sent_at + interval '1 minute', 1, 'STEP_OUTCOME_SENT', '<' || st.id || '@bench.example.com>', 0, 'smtp', st.sent_at, st.sent_at
           FROM st WHERE st.sent_channel = 'EMAIL' RETURNING 1)
       INSERT INTO channel_sms.send_log (step_id, attempt_id, channel, organization_id, state, lease_until, attempts, outcome, provider_message_id, parts, provider, address, created_at, updated_at)
       SELECT st.id::text, st.id || ':1', 'SMS', $1, 'done', st.sent_at + interval '1 minute', 1, 'STEP_OUTCOME_SENT', (abs(hashtext(st.id::text)) % 1000000000)::text || '-' || r.phone, 1, 'smsc', r.phone, st.sent_at, st.sent_at
         FROM st JOIN r ON r.id = st.recipient_id WHERE st.sent_channel = 'SMS'` : `
       SELECT 1`}`,
      [organizationId, locationId, from, to, cascades],
    );
    process.stdout.write(`  seeded ${Math.min(total, (to + 1) * 3)} / ${total} recipients\r`);
  }
  // Feed positions are not needed by anything measured; the counters table starts after them.
  await db.query('ANALYZE');
  process.stdout.write('\n');
}
