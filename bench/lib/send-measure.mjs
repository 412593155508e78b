// What bench/send.mjs reads about the processes it runs: CPU time and peak memory from /proc (Linux),
// Prometheus counters from /metrics, PostgreSQL round trips from the preloaded counter
// (bench/lib/pg-round-trips.cjs), and latency percentiles.
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const require = createRequire(join(root, 'package.json'));
const TICKS_PER_SECOND = 100;

/** Epoch milliseconds with sub-millisecond precision, comparable across processes of one machine. */
export const nowMs = () => performance.timeOrigin + performance.now();

/** A process's own CPU seconds, or (`reaped`) those of its children that ended and it waited for. */
function readStat(pid, reaped = false) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return reaped ? (Number(fields[13]) + Number(fields[14])) / TICKS_PER_SECOND : (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** PostgreSQL's postmaster (its backends' parent): `…/bin/postgres -D …`. */
const POSTMASTER = /\/bin\/postgres\s/;

function cmdline(pid) {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
}

/**
 * CPU seconds (user + system, all threads) per named group. `groups` maps a name to a pid or to a
 * predicate on the command line; a process that ended between two snapshots loses its time (but for
 * `postgresBackendsWithEndedOf`), one that started counts from zero.
 */
export function cpuSnapshot(groups) {
  const out = Object.fromEntries(Object.keys(groups).map((name) => [name, 0]));
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    for (const [name, match] of Object.entries(groups)) {
      try {
        if (typeof match === 'number') {
          if (match === Number(pid)) out[name] += readStat(pid);
          continue;
        }
        const line = cmdline(pid);
        if (match(line)) out[name] += readStat(pid);
        // A backend that ended between two snapshots keeps its time in the postmaster's children's time.
        else if (match.withEndedBackends && POSTMASTER.test(line)) out[name] += readStat(pid, true);
      } catch {
        // the process ended between the listing and the read
      }
    }
  }
  return out;
}

/** Command-line predicates for the shared servers: PostgreSQL's backends of one database, its own processes, a NATS server. */
export const processMatchers = {
  postgresBackendsOf: (database) => (line) => line.startsWith('postgres: ') && line.includes(` ${database} `),
  /**
   * The backends of one database, and the backends that ended (of any database: the postmaster counts
   * its ended children together): a difference of two snapshots loses no connection that closed between
   * them, which is right on a machine where only the bench's database is busy.
   */
  postgresBackendsWithEndedOf: (database) => Object.assign((line) => line.startsWith('postgres: ') && line.includes(` ${database} `), { withEndedBackends: true }),
  postgresServer: (line) => /^postgres: (\S+: )?(checkpointer|background writer|walwriter|autovacuum launcher|autovacuum worker|logical replication launcher|stats collector|archiver)/.test(line) || /\/bin\/postgres\s/.test(line),
  natsServer: (port) => (line) => /(^|\/)nats-server(\s|$)/.test(line) && (!/\s(-p|--port)\s/.test(line) || new RegExp(`\\s(-p|--port)\\s${port}(\\s|$)`).test(line)),
};

/** Peak resident set (VmHWM) of a process in MB; null when it cannot be read. */
export function peakRssMb(pid) {
  try {
    const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Math.round(Number(kb) / 1024) : null;
  } catch {
    return null;
  }
}

/** The memory limit of each service in the Helm chart's values (MiB), by service directory name. */
export function chartMemoryLimits() {
  const YAML = require('yaml');
  const values = YAML.parse(readFileSync(join(root, 'deploy', 'helm', 'values.yaml'), 'utf8'));
  const camel = (name) => name.replace(/-(\w)/g, (_m, c) => c.toUpperCase());
  const limits = {};
  for (const name of ['gateway', 'contacts', 'cascade-scheduler', 'channel-email', 'channel-sms', 'webhooks']) {
    const raw = values[camel(name)]?.resources?.limits?.memory;
    if (typeof raw === 'string' && /^\d+Mi$/.test(raw)) limits[name] = Number(raw.slice(0, -2));
    if (typeof raw === 'string' && /^\d+Gi$/.test(raw)) limits[name] = Number(raw.slice(0, -2)) * 1024;
  }
  return limits;
}

/** Sum of a Prometheus counter over the series whose labels include all of `labels`. */
export async function readCounter(metricsUrl, name, labels = {}) {
  const text = await (await fetch(metricsUrl)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[3] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) total += Number(m[4]);
  }
  return total;
}

/**
 * PostgreSQL requests and round trips counted so far in a process started with the preloaded counter;
 * null when it does not answer (not a Node process, or no IPC channel).
 */
export function pgCount(child, timeoutMs = 3_000) {
  if (!child.connected) return Promise.resolve(null);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.off('message', onMessage);
      resolve(null);
    }, timeoutMs);
    function onMessage(message) {
      if (message?.rrsBench !== 'pg-count') return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve({ requests: message.requests, roundTrips: message.roundTrips });
    }
    child.on('message', onMessage);
    child.send({ rrsBench: 'pg-count' });
  });
}

/** p50/p95/p99/max of a list of numbers (sorted in place); null when empty. */
export function percentiles(values) {
  if (values.length === 0) return null;
  values.sort((a, b) => a - b);
  const at = (p) => values[Math.min(values.length - 1, Math.ceil(p * values.length) - 1)];
  return { n: values.length, p50: at(0.5), p95: at(0.95), p99: at(0.99), max: values[values.length - 1] };
}

export async function waitUntil(probe, maxMs, what, intervalMs = 50) {
  const deadline = Date.now() + maxMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${Math.round(maxMs / 1000)} s: ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
