import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU seconds so far of each group of processes (Linux /proc; null elsewhere). A group's matcher gets
 * the pid, the command name and, for a PostgreSQL process, its command line (a backend's names its
 * database: `postgres: 15/main: <user> <database> <client> …`).
 */
export function cpuByGroup(groups) {
  const out = Object.fromEntries(Object.keys(groups).map((k) => [k, 0]));
  let pids;
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return null;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      // A backend's command line names its database (`postgres: 15/main: <user> <database> <client> …`).
      const command = comm === 'postgres' ? readFileSync(`/proc/${pid}/cmdline`, 'utf8') : '';
      for (const [k, match] of Object.entries(groups)) if (match(Number(pid), comm, command)) out[k] += (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      // the process ended between the listing and the read
    }
  }
  return out;
}
