import { busV1, stepSubject } from '@rrs/proto';
import { counter, histogram, sqlArray, type Bus, type Logger, type Pool, type PoolClient } from '@rrs/runtime';
import { tokenUrl } from './cascades';
import type { ConfiguredChannels } from './directory';
import { addressFor, fire, PHONE_CHAIN, type Dispatch, type FireChecks, type Timing } from './engine';
import { Wakeable, type Notifier } from './notifier';
import { claimDue, dbNow, DUE_CHANNEL, saveStates, type LoadedRecipient } from './store';

const lateness = histogram({
  name: 'scheduler_step_lateness_seconds',
  help: 'Time from a step being due to its dispatch.',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
});
const dispatched = counter({ name: 'scheduler_steps_dispatched_total', help: 'Steps published to their channel.', labelNames: ['channel'] });
const skippedAtFire = counter({ name: 'scheduler_steps_skipped_total', help: 'Steps skipped when they came due.', labelNames: ['reason'] });

export interface DispatcherOptions {
  pool: Pool;
  bus: Bus;
  notifier: Notifier;
  channels: ConfiguredChannels;
  logger: Logger;
  minuteMs: number;
  publicBaseUrl: string;
  batchSize?: number;
  /** Longest sleep with nothing due: a safety net against a lost notification, not the wake mechanism. */
  maxIdleMs?: number;
  /**
   * Claim loops in this process (default 2): while one waits on PostgreSQL, another publishes. They
   * share work through SKIP LOCKED exactly as replicas do.
   */
  loops?: number;
  /**
   * Awaited before each round. The scheduler passes "until fewer than two batches of results wait":
   * a result finishes work already in flight and schedules the next step, so it goes first; steps
   * dispatched faster than their results can be applied would only lengthen the queue of results
   * (and, on a shared CPU, slow their applying down).
   */
  beforeRound?: () => Promise<void>;
  /** Test hook: runs after a batch's publishes, before its transaction commits. */
  afterPublish?: (client: PoolClient, dispatches: Dispatch[]) => Promise<void>;
}

export interface RunningDispatcher {
  stop(): Promise<void>;
  /** Steps dispatched by this dispatcher since start. */
  readonly dispatchedCount: number;
}

/**
 * The step id a sender sees: the step's own id on its flow channel, `<id>.<CHANNEL>` on a reroute hop.
 * A sender's send log is keyed by step id ("never send a step twice"); a hop to another channel is
 * another send, which must not find the previous channel's recorded outcome.
 */
export function senderStepId(d: Dispatch): string {
  return d.step.reroutes.length === 0 ? d.step.id : `${d.step.id}.${d.channel}`;
}

function stepDue(state: LoadedRecipient, d: Dispatch, publicBaseUrl: string, now: Date): busV1.StepDue {
  const r = state.recipient;
  const m = state.meta;
  // Claimed recipients are loaded with their token (store.claimDue).
  if (!m.token) throw new Error(`recipient ${r.id} was loaded without its review link token`);
  const template = m.templates[d.channel] ?? (d.channel !== 'EMAIL' ? m.templates.SMS : undefined) ?? { subject: '', body: '' };
  return {
    stepId: senderStepId(d),
    attemptId: d.attemptId,
    attempt: d.step.attempt,
    organizationId: r.organizationId,
    cascadeId: r.cascadeId,
    recipientId: r.id,
    channel: d.channel,
    recipient: { name: r.name, email: r.email, phone: r.phone },
    location: m.location,
    template: { subject: template.subject, body: template.body },
    reviewUrl: tokenUrl(publicBaseUrl, 'r', m.token),
    unsubscribeUrl: tokenUrl(publicBaseUrl, 'u', m.token),
    locale: m.locale,
    dueAt: d.step.dueAt ?? now,
    dispatchedAt: now,
  };
}

/**
 * The durable-timer dispatcher. Each round, in one transaction: claim due steps (with their
 * recipients, SKIP LOCKED), check each step's conditions now that it fires, publish the dispatched ones
 * to `steps.<channel>` with Nats-Msg-Id = attempt id, save, commit. A crash before the commit releases
 * the claim; the next claimer publishes the same attempt ids, which the stream drops as duplicates.
 * Between rounds it sleeps until the nearest due time or a notification of newly committed work.
 */
export async function startDispatcher(o: DispatcherOptions): Promise<RunningDispatcher> {
  const batchSize = o.batchSize ?? 500;
  const maxIdleMs = o.maxIdleMs ?? 30_000;
  const wakeables = Array.from({ length: Math.max(1, o.loops ?? 2) }, () => new Wakeable());
  o.notifier.on(DUE_CHANNEL, (payload) => {
    const at = Number(payload);
    for (const w of wakeables) w.wake(Number.isFinite(at) && payload !== '' ? at : undefined);
  });
  o.notifier.onReconnect(() => {
    for (const w of wakeables) w.wake();
  });
  let running = true;
  let stop!: () => void;
  const stopping = new Promise<void>((resolve) => (stop = resolve));
  let count = 0;
  async function round(): Promise<number> {
    if (o.beforeRound) await Promise.race([o.beforeRound(), stopping]);
    if (!running) return 0;
    const client = await o.pool.connect();
    let released = false;
    try {
      await client.query('BEGIN');
      const now = await dbNow(client);
      const { states, claimed } = await claimDue(client, now, batchSize);
      if (claimed.length === 0) {
        await client.query('COMMIT');
        return 0;
      }
      const t: Timing = { now, minuteMs: o.minuteMs };
      const checks = await fireChecks(client, o.channels, states.values());
      const dispatches: Array<{ state: LoadedRecipient; d: Dispatch }> = [];
      for (const { step_id: stepId, recipient_id: recipientId } of claimed) {
        const state = states.get(recipientId);
        let current = state?.steps.find((s) => s.id === stepId);
        if (!state || !current) continue;
        const stateChecks = checks(state.recipient.organizationId);
        // A skip schedules the next step, due at once when nothing was sent yet: fire it in this round.
        for (let guard = 0; current && guard <= state.steps.length * 3; guard++) {
          const d = fire(state, current, stateChecks, t);
          if (d) {
            dispatches.push({ state, d });
            break;
          }
          if (current.status === 'skipped') skippedAtFire.inc({ reason: current.reason ?? '' });
          current = state.steps.find((s) => s.status === 'scheduled' && s.dueAt !== null && s.dueAt <= now);
        }
      }
      // One pipelined batch: every message is written before any acknowledgement is awaited.
      await o.bus.publishBatch(
        dispatches.map(({ state, d }) => ({
          subject: stepSubject(d.channel),
          data: busV1.StepDue.encode(stepDue(state, d, o.publicBaseUrl, now)).finish(),
          // The cascade's start is the parent of its steps' publication (the bus wrapper reads it).
          options: { msgId: d.attemptId, headers: state.meta.traceContext },
        })),
      );
      if (o.afterPublish) await o.afterPublish(client, dispatches.map((x) => x.d));
      await saveStates(client, states.values(), now);
      await client.query('COMMIT');
      for (const { d } of dispatches) {
        lateness.observe(Math.max(0, now.getTime() - (d.step.dueAt ?? now).getTime()) / 1000);
        dispatched.inc({ channel: d.channel });
      }
      count += dispatches.length;
      return claimed.length;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      // A broken connection must not go back to the pool.
      client.release(err as Error);
      released = true;
      throw err;
    } finally {
      if (!released) client.release();
    }
  }

  async function msUntilNextDue(): Promise<number> {
    const { rows } = await o.pool.query<{ ms: number | null }>(
      `SELECT (extract(epoch FROM min(due_at) - clock_timestamp()) * 1000)::float8 AS ms FROM recipient_steps WHERE status = 'scheduled'`,
    );
    const ms = rows[0].ms;
    return ms === null ? maxIdleMs : Math.min(maxIdleMs, Math.max(0, ms));
  }

  const runLoop = async (wakeable: Wakeable): Promise<void> => {
    let failures = 0;
    while (running) {
      try {
        const claimed = await round();
        failures = 0;
        if (claimed > 0) continue;
        // Nothing claimable but something due now means another loop or replica holds it: give it a
        // moment rather than spin.
        const next = await msUntilNextDue();
        const wait = next > 0 ? next : 20;
        if (running) await wakeable.sleep(wait);
      } catch (err) {
        failures++;
        const delay = Math.min(5_000, 100 * 2 ** Math.min(failures, 6));
        o.logger.warn({ err, retryInMs: delay }, 'dispatch round failed');
        if (running) await wakeable.sleep(delay);
      }
    }
  };
  const loops = Promise.all(wakeables.map(runLoop));

  return {
    get dispatchedCount() {
      return count;
    },
    async stop() {
      running = false;
      stop();
      for (const w of wakeables) w.wake();
      await loops;
    },
  };
}

async function fireChecks(client: PoolClient, channels: ConfiguredChannels, states: Iterable<LoadedRecipient>): Promise<(organizationId: string) => FireChecks> {
  const list = [...states];
  const configured = await channels.forOrganizations(list.map((s) => s.recipient.organizationId));
  const orgs = new Set<string>();
  const addresses = new Set<string>();
  // Every channel a step of these recipients may fire on, so the lookup stays on the whole primary key.
  const channelKeys = new Set<string>(PHONE_CHAIN);
  for (const s of list) {
    orgs.add(s.recipient.organizationId);
    for (const a of [addressFor('EMAIL', s.recipient), addressFor('SMS', s.recipient)]) if (a) addresses.add(a);
    for (const step of s.steps) channelKeys.add(step.channel).add(step.sentChannel);
  }
  const optedOut = new Set<string>();
  if (addresses.size) {
    // Organizations × addresses may pair an address with another organization than its recipient's;
    // the lookup below is by the recipient's own organization, so such a row is never consulted.
    const { rows } = await client.query<{ organization_id: string; channel: string; address: string }>(
      'SELECT organization_id, channel, address FROM opt_outs WHERE organization_id = ANY($1::uuid[]) AND channel = ANY($2::text[]) AND address = ANY($3::text[])',
      [sqlArray([...orgs]), sqlArray([...channelKeys]), sqlArray([...addresses])],
    );
    for (const r of rows) optedOut.add(`${r.organization_id}|${r.channel}|${r.address}`);
  }
  return (org) => ({
    configured: (channel) => configured.get(org)?.has(channel) ?? false,
    optedOut: (channel, address) => optedOut.has(`${org}|${channel}|${address}`),
  });
}
