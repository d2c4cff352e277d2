/**
 * A machine of the local process supervisor as callers see it (its launch, its status) and as the
 * supervisor keeps it (a record per machine, an incarnation per run of its process tree).
 */
import type { Role } from '@robustrl/contracts';
import type { MachineSpec } from '../orchestrator';

/** What to run for a machine. `env` is laid over this process's environment. */
export interface LocalLaunchCommand {
  command: string;
  args: string[];
  env?: Record<string, string>;
  cwd?: string;
}

export type LocalMachineLaunch = MachineSpec & { jobId: string };

export interface LocalProcessSupervisorOptions {
  /**
   * The command of a machine. Called once per machine, when it is first launched; restarts reuse the
   * command and the resolved environment, so a restarted machine runs exactly as before.
   */
  launch: (machine: LocalMachineLaunch) => LocalLaunchCommand;
  /** How long a machine gets between SIGTERM and SIGKILL. Default 5000. */
  stopGraceMs?: number;
  /**
   * Receives each stdout/stderr line of each machine. Default: written to this process's stderr as
   * `[machineId] line`, because a machine that dies silently is what makes an end-to-end test
   * undebuggable. Pass `() => {}` to discard.
   */
  output?: (machineId: string, line: string) => void;
  /**
   * The id of a machine created by `requestMachine`. `sequence` counts up per role from 0; an id
   * already in use (e.g. one given to `launchJob`) is skipped. Default `${role}-${sequence}`.
   */
  machineIdFor?: (role: Role, sequence: number) => string;
}

export type LocalMachineStatus = 'running' | 'exited' | 'isolated' | 'released';

/** How a machine's leader process ended; both null when it never started. */
export interface LocalMachineExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface LocalMachineSnapshot extends MachineSpec {
  jobId: string;
  /** Of the latest incarnation, running or not; undefined if it never started. */
  pid: number | undefined;
  status: LocalMachineStatus;
  /** Completed relaunches by restartMachines / restartTask. */
  restarts: number;
}

export interface ResolvedLaunchCommand {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd?: string;
}

/** One run of a machine's process tree; a restart makes a new one. */
export interface Incarnation {
  /** Also the process group id, the child being its group's leader. */
  readonly pid: number | undefined;
  exit?: LocalMachineExit;
  readonly exited: Promise<LocalMachineExit>;
  /** Once true the group id is never signalled again: it may be reused by an unrelated group. */
  groupGone: boolean;
}

export interface MachineRecord {
  readonly spec: MachineSpec;
  readonly jobId: string;
  readonly command: ResolvedLaunchCommand;
  /** Set once the machine left the job (isolated: suspect; released: given back); it is never relaunched. */
  retired?: 'isolated' | 'released';
  restarts: number;
  current?: Incarnation;
  /** Restarts of one machine run one after the other, so two of them never leave two incarnations. */
  queue: Promise<unknown>;
}

export function statusOf(record: MachineRecord): LocalMachineStatus {
  if (record.retired) return record.retired;
  return record.current && !record.current.exit ? 'running' : 'exited';
}

export function signalGroup(incarnation: Incarnation, signal: NodeJS.Signals): void {
  if (incarnation.groupGone || incarnation.pid === undefined) return;
  try {
    process.kill(-incarnation.pid, signal);
  } catch (error) {
    // ESRCH: the group is already empty, which is what the caller wants.
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
