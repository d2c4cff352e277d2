import { readdirSync, readFileSync } from 'node:fs';

/**
 * The processes below `root`, found through /proc (Linux, like the GPU machines the agent runs on).
 *
 * The agent keeps its role process in its own process group rather than giving it a group of its
 * own, so that whatever takes the machine down (a SIGKILL of the agent's group, an orchestrator
 * killing the machine) takes the role with it. To stop only the role, it walks the role's tree.
 */
export function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // Fields after the command name, which is in parentheses and may itself contain spaces or ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ppid = Number(fields[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(entry));
    children.set(ppid, list);
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length) {
    for (const child of children.get(queue.shift()!) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** `root` and everything below it now. */
export function treeOf(root: number): number[] {
  return [root, ...descendantsOf(root)];
}

/** Send `signal` to each of `pids`; processes already gone are skipped. */
export function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone already
    }
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    // A zombie still answers; it is dead for our purposes.
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
