import type { LevelResult } from './measure';
import type { Level } from './options';
import type { Workload } from './workloads';

/** A level that failed to run (its load generator died, the target went away). */
export interface LevelFailure {
  level: Level;
  error: string;
}

/** One target under one workload: its levels, or why it did not start. */
export interface TargetRun {
  target: string;
  label: string;
  workload: Workload;
  launch: string[];
  error: string | null;
  levels: Array<LevelResult | LevelFailure>;
  /** Which round of `--rounds` it ran in (0-based); absent in a merged run. */
  round?: number;
  /** In a merged run: how many rounds it merges (rounds.ts). */
  rounds?: number;
}
