import pg from 'pg';
import type { Logger } from 'pino';
import { gauge } from './metrics';

/**
 * Leader election between the replicas of a service, on PostgreSQL: the leader is the process that
 * holds a session advisory lock named after the job, on a connection of its own. Jobs that must run on
 * one replica at a time (retention purges and other periodic housekeeping whose work is not claimed row
 * by row) run only where `isLeader` is true; work that is claimed with `FOR UPDATE SKIP LOCKED` is
 * shared by every replica instead and needs no leader.
 *
 * Invariants:
 * - at most one process holds the lock at any time (PostgreSQL's guarantee); a process believes it
 *   leads only while its own lock connection answers, checked every `checkMs`;
 * - when the leader dies or loses its connection, the server drops its session and its lock, and another
 *   replica takes over on its next try (within `checkMs`, plus the time PostgreSQL takes to notice a dead
 *   peer: at once for a killed process, whose socket closes);
 * - a PostgreSQL failover drops every session: the lock is then taken again on the new primary.
 */
export interface Leadership {
  readonly isLeader: boolean;
  /** Runs `job` if this process leads now (after the first try to take the lead); resolves undefined without running it otherwise. */
  ifLeader<T>(job: () => Promise<T>): Promise<T | undefined>;
  /** Releases the lock (if held) and stops trying. */
  stop(): Promise<void>;
}

export interface LeaderOptions {
  databaseUrl: string;
  /** What is elected, e.g. `webhooks-retention`; replicas with the same name compete. */
  name: string;
  logger: Logger;
  /** How often a follower tries to take the lock and the leader checks its connection. Default 2 000. */
  checkMs?: number;
}

const leading = gauge({ name: 'rrs_leader', help: 'Whether this process leads the named job (1) or not (0)', labelNames: ['name'] as const });

export function electLeader(options: LeaderOptions): Leadership {
  const checkMs = options.checkMs ?? 2_000;
  const log = options.logger.child({ leader: options.name });
  let client: pg.Client | null = null;
  let isLeader = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let firstTry: Promise<void> | null = null;

  const setLeader = (value: boolean) => {
    if (value !== isLeader) log.info({ leader: value }, value ? 'took the lead' : 'lost the lead');
    isLeader = value;
    leading.set({ name: options.name }, value ? 1 : 0);
  };

  const drop = async () => {
    const c = client;
    client = null;
    setLeader(false);
    if (c) await c.end().catch(() => undefined);
  };

  const attempt = async () => {
    try {
      if (!client) {
        const c = new pg.Client({ connectionString: options.databaseUrl, application_name: `leader:${options.name}` });
        // A lost connection is found by the next check; the error must not crash the process.
        c.on('error', () => undefined);
        await c.connect();
        client = c;
      }
      if (isLeader) {
        await client.query('SELECT 1');
        return;
      }
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 31)) AS ok', [`rrs-leader:${options.name}`]);
      setLeader(rows[0].ok);
    } catch (err) {
      if (isLeader) log.warn({ err }, 'leader connection lost; another replica may take the lead');
      await drop();
    }
  };

  const loop = () => {
    if (stopped) return;
    running = attempt().finally(() => {
      firstTry ??= Promise.resolve();
      if (!stopped) {
        timer = setTimeout(loop, checkMs);
        timer.unref();
      }
    });
  };
  leading.set({ name: options.name }, 0);
  loop();
  const tried = running;

  return {
    get isLeader() {
      return isLeader;
    },
    async ifLeader(job) {
      await (firstTry ?? tried);
      return isLeader ? job() : undefined;
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
      // Ending the session releases the lock at once: the next replica need not wait for a timeout.
      await drop();
    },
  };
}
