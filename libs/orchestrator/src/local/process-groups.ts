/**
 * Process groups of the local supervisor's machines: whether one still has a live member, and the
 * guard that kills them all when the host process goes away (the mapping in local-process-supervisor.ts).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * Whether a process other than a zombie is left in the group. Zombies count as gone: a descendant
 * orphaned by the leader's death waits for init to reap it, which can take seconds in a container,
 * and it can do nothing any more.
 */
export function groupHasLiveMembers(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    // EPERM: a member exists that we may not signal (it changed its user); it is alive.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
  if (process.platform !== 'linux') return true;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return true;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // "pid (comm) state ppid pgrp …"; comm may contain spaces and parentheses, so split after the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z' && state !== 'X') return true;
  }
  return false;
}

/**
 * SIGKILLs the process groups it watches when the host process goes away: synchronously on the
 * host's `exit` event, and through a watchdog process for deaths without one. The watchdog reads
 * "+pgid"/"-pgid" lines on stdin; when stdin closes (the host closed it, or the kernel did because
 * the host died) it SIGKILLs every group still listed. It is detached, so a Ctrl-C to the host's
 * terminal does not take it down with the host, and unreferenced, so it never keeps the host alive.
 */
export class OrphanGuard {
  private readonly groups = new Set<number>();
  private watchdog?: ChildProcess;
  private readonly killAllNow = () => {
    for (const pgid of this.groups) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // Already gone, or not ours to kill: nothing more can be done while exiting.
      }
    }
  };

  watch(pgid: number): void {
    if (this.groups.size === 0) process.on('exit', this.killAllNow);
    this.groups.add(pgid);
    this.tell(`+${pgid}`);
  }

  forget(pgid: number): void {
    if (!this.groups.delete(pgid)) return;
    this.tell(`-${pgid}`);
    if (this.groups.size === 0) process.removeListener('exit', this.killAllNow);
  }

  dispose(): void {
    process.removeListener('exit', this.killAllNow);
    // Ending stdin makes the watchdog kill whatever is still listed (nothing, after a clean close) and exit.
    this.watchdog?.stdin?.end();
    this.watchdog = undefined;
  }

  private tell(line: string): void {
    const stdin = (this.watchdog ??= startWatchdog()).stdin;
    stdin?.write(`${line}\n`);
  }
}

const WATCHDOG_SOURCE = `
const groups = new Set();
let pending = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  pending += chunk;
  let newline;
  while ((newline = pending.indexOf('\\n')) >= 0) {
    const line = pending.slice(0, newline);
    pending = pending.slice(newline + 1);
    const pgid = Number(line.slice(1));
    if (!(pgid > 0)) continue;
    if (line[0] === '+') groups.add(pgid);
    else if (line[0] === '-') groups.delete(pgid);
  }
});
process.stdin.on('close', () => {
  for (const pgid of groups) {
    try { process.kill(-pgid, 'SIGKILL'); } catch {}
  }
  process.exit(0);
});
`;

function startWatchdog(): ChildProcess {
  const watchdog = spawn(process.execPath, ['-e', WATCHDOG_SOURCE], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  // Without a watchdog the exit hook and close() still work; losing it must not crash the host.
  watchdog.on('error', (error) => process.stderr.write(`local process supervisor: orphan watchdog failed: ${messageOf(error)}\n`));
  watchdog.stdin?.on('error', () => undefined);
  watchdog.unref();
  // stdin is a pipe socket; Writable's type does not show its unref.
  (watchdog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return watchdog;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
