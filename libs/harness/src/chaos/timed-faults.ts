import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Faults timed to what the job does, for the campaign on a job that has them (system-chaos.ts): an
 * engine killed as its agent loads a version into it, a trainer rank killed as it begins its checkpoint.
 */
export interface Hit {
  target: string;
  note: string;
}

/** The machines' log lines as they come, and a kill of a machine's role process. */
export interface MachineLines {
  /** Calls `watcher` with every line of every machine's log until the returned function is called. */
  watch(watcher: (machineId: string, line: string) => void): () => void;
  kill(machineId: string): void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LOAD_WAIT_MS = 300_000;

/**
 * kill -9 of a rollout's engine the moment its agent says it loads a version into it (the agent's
 * log line before the engine's pause): the load is cut off in the middle, or just before it began.
 */
export async function killEngineDuringLoad(wanted: string | undefined, machines: MachineLines): Promise<Hit> {
  if (!wanted) return { target: 'none', note: 'no rollout with a running engine' };
  const seen = await new Promise<{ machineId: string; line: string } | null>((done) => {
    // A replacement or restarted engine starts in minutes on two loaded cores before it loads anything.
    const timer = setTimeout(() => finish(null), LOAD_WAIT_MS);
    const watcher = (machineId: string, line: string) => {
      if (machineId !== wanted || !/engine loads version \d+/.test(line)) return;
      machines.kill(machineId);
      finish({ machineId, line });
    };
    const finish = (value: { machineId: string; line: string } | null) => {
      clearTimeout(timer);
      unwatch();
      done(value);
    };
    const unwatch = machines.watch(watcher);
  });
  if (!seen) return { target: 'none', note: `no load began on ${wanted} within ${LOAD_WAIT_MS / 1000} s: nothing killed` };
  return { target: wanted, note: `killed as it began: ${/engine loads version \d+/.exec(seen.line)?.[0]}` };
}

/**
 * kill -9 of a trainer rank the moment its ledger line says it trained a step, after which it writes
 * the step's checkpoint: the process that wrote the line (its pid) is killed. The note says whether
 * the step's checkpoint was left incomplete (killed mid-write) or not begun.
 */
export async function killTrainerAtCheckpoint(stateDir: string, rank: number): Promise<Hit> {
  const ledger = join(stateDir, 'ledger.jsonl');
  let offset = existsSync(ledger) ? statSync(ledger).size : 0;
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const size = existsSync(ledger) ? statSync(ledger).size : 0;
    if (size > offset) {
      const fresh = readFileSync(ledger).subarray(offset, size).toString('utf8');
      offset = size;
      for (const line of fresh.split('\n')) {
        let record: { kind?: string; rank?: number; step?: number; pid?: number };
        try {
          record = JSON.parse(line) as typeof record;
        } catch {
          continue;
        }
        if (record.kind !== 'trained' || record.rank !== rank || !record.pid) continue;
        try {
          process.kill(record.pid, 'SIGKILL');
        } catch {
          continue; // gone already
        }
        await sleep(1_000);
        const folder = join(stateDir, 'checkpoints', `step-${String(record.step).padStart(6, '0')}`);
        const state = !existsSync(folder) ? 'not begun' : existsSync(join(folder, '.metadata')) ? 'complete (the kill came after the save)' : 'left incomplete';
        return { target: `rank ${rank} (pid ${record.pid})`, note: `step ${record.step} trained; its checkpoint ${state}` };
      }
    }
    await sleep(10);
  }
  return { target: 'none', note: `rank ${rank} trained no step within 120 s` };
}
