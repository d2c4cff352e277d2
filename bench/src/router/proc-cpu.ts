import { readdirSync, readFileSync } from 'node:fs';

/** USER_HZ, the unit of /proc's CPU times: 100 on every Linux build that matters. */
const CLOCK_TICKS_PER_SECOND = 100;

/** CPU time (user + system, every thread) a process has used, in ms, from /proc/<pid>/stat; null when it is gone. */
export function cpuMsOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state …": fields after the comm's closing parenthesis; utime and stime are the 14th and 15th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

function cmdlineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return '';
  }
}

/** Every process whose command line `match` accepts (a PostgreSQL backend shows its database in its title). */
export function pidsWhere(match: (cmdline: string) => boolean): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  return entries.filter((e) => /^\d+$/.test(e) && match(cmdlineOf(Number(e)))).map(Number);
}

/**
 * PostgreSQL's share of a run: the backends serving `database` (the bench's own throw-away database, so
 * another user's sessions on the same server do not count; a backend's title is `postgres: <user>
 * <database> <client> <state>`), and the server's background writers, which write what they insert.
 */
export function postgresProcessesOf(database: string): number[] {
  return pidsWhere(
    (c) => c.startsWith('postgres: ') && (c.split(' ')[2] === database || /^postgres: (checkpointer|background writer|walwriter|autovacuum)/.test(c)),
  );
}

/** The local Kafka broker's JVM (deploy/local/kafka.sh starts `java … kafka.Kafka server.properties`). */
export function kafkaBrokerPids(): number[] {
  return pidsWhere((c) => /(^|\/)java$/.test(c.split(' ')[0]) && / kafka\.Kafka /.test(` ${c} `));
}

/**
 * CPU of a set of processes over a window: read at its start and end. Pids are found again at the end
 * (a backend opened mid-window counts from its start); one gone by then is missing from the sum.
 */
export class CpuWindow {
  private readonly before = new Map<number, number>();

  constructor(private readonly pids: () => number[]) {
    for (const pid of pids()) {
      const ms = cpuMsOf(pid);
      if (ms !== null) this.before.set(pid, ms);
    }
  }

  /** CPU ms used since the start. */
  end(): number {
    let sum = 0;
    for (const pid of this.pids()) {
      const ms = cpuMsOf(pid);
      if (ms !== null) sum += ms - (this.before.get(pid) ?? 0);
    }
    return sum;
  }
}
