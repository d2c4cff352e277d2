import type { DecisionRule, RecoveryAction, RolePhase } from '@robustrl/contracts';

/**
 * The ETTR read model of one job (paper §7): GPU-time split into effective time and a downtime ledger.
 *
 * Effective: rollout generation, tool interaction, training computation and the job's own pipeline
 * (weight sync, checkpoint blocking, a role waiting for the other in a healthy pipeline). Not effective
 * (the ledger's categories):
 *   - `startup`               machines initialising at job start or joining later (no fault involved)
 *   - `detection`             from a fault until its verdict: the role was dead but nobody knew
 *   - `restart`               from the verdict until the restarted/replacement process reports in
 *   - `reinitialization`      the restarted process initialising (engine, checkpoint load, worker init)
 *   - `waiting-on-dead-role`  a healthy role idle because another role is down (e.g. rollouts done, trainer restarting)
 *   - `lost-rollout`          rollout generation thrown away by a task restart (re-executed afterwards)
 *
 * Machines are weighted by their GPUs, so during a trainer restart with rollouts still generating the job
 * counts #rollout GPUs / (#rollout + #trainer GPUs) as effective — the paper's recovery ratio.
 */
export type DowntimeCategory = 'startup' | 'detection' | 'restart' | 'reinitialization' | 'waiting-on-dead-role' | 'lost-rollout';
export const DOWNTIME_CATEGORIES: readonly DowntimeCategory[] = ['startup', 'detection', 'restart', 'reinitialization', 'waiting-on-dead-role', 'lost-rollout'];

export interface EttrSettings {
  /** Sliding ETTR window (paper Fig. 12 samples every 5 minutes). */
  windowMs: number;
  /** Resolution of the sliding series; the window is a whole number of these. */
  sampleMs: number;
  /** Buckets kept for the sliding series (older ones are dropped; totals are kept whole). */
  maxBuckets: number;
}
export const DEFAULT_ETTR_SETTINGS: EttrSettings = { windowMs: 300_000, sampleMs: 60_000, maxBuckets: 20_160 };

export interface MachineView {
  machineId: string;
  role: 'trainer' | 'rollout' | 'hybrid';
  gpus: number;
  phase: RolePhase | null;
  /** The outage holding this machine down, if any. */
  heldBy: string | null;
  /** Its restart (or replacement) was ordered: reports from now on are life signs of the new process. */
  restartOrdered: boolean;
  /** The restarted process has reported a phase since its restart was ordered. */
  reportedSinceRestart: boolean;
  /** Since when the machine has been effective without a break (null while it is down): a verdict's detection window reaches back at most to here. */
  effectiveSince: number | null;
  /** Deregistered while held: its slot stays (and counts as down) until the outage is resolved. */
  ghost: boolean;
  /** Rollout generation since the last consumed batch, [start, end) ms: lost if the task restarts. */
  atRisk: Array<[number, number]>;
  /**
   * The machine's GPU time is accounted up to here (null: from the job's start). `effectiveSince`,
   * `atRisk` and its ledger rows are as of this time: a machine is accounted when it changes (or an
   * outage it may wait on does), not on every event (thousands of machines, millions of
   * events). `settle` brings it up to the clock.
   */
  accountedTo: number | null;
  /** How it counts from `accountedTo` on, fixed when it last changed: the downtime it is in (null: effective), */
  countsAs: { category: DowntimeCategory; outageId: string | null } | null;
  /** its GPUs, */
  countsGpus: number;
  /** whether it generates rollout work a task restart would lose, */
  countsGenerating: boolean;
  /** the side it belongs to (null: not counted), and whether it serves there (see `EttrIndex.serving`). */
  countsSide: 'trainer' | 'rollout' | null;
  countsServing: boolean;
}

export interface Outage {
  /** The verdict id (one outage per confirmed fault). */
  outageId: string;
  recoveryId: string | null;
  /** The machine the fault was confirmed on. */
  machineId: string;
  handledAs: 'trainer' | 'rollout';
  /** The detection rule that confirmed the fault (`explicit-signal`, `trainer-idle`, …). */
  detectionRule: string;
  /** Announced before it happened (a drain or preemption notice confirmed it), not found by a crash or silence. */
  planned: boolean;
  action: RecoveryAction | null;
  decisionRule: DecisionRule | null;
  startedAt: number;
  confirmedAt: number;
  /** Replacement awaited for this machine (ReplaceMachine issued, no new machine registered yet). */
  awaitingReplacement: Array<{ machineId: string; role: string }>;
  taskRestart: boolean;
  closedAt: number | null;
}

export interface LedgerEntry {
  category: DowntimeCategory;
  /** null for `startup`. */
  outageId: string | null;
  /** The machine whose GPU time was lost (a trainer fault holds the whole trainer group). */
  machineId: string;
  role: string;
  gpuMs: number;
}

export interface Bucket {
  startMs: number;
  effectiveGpuMs: number;
  totalGpuMs: number;
}

export interface StageSample {
  recoveryId: string;
  action: RecoveryAction | null;
  outcome: 'recovered' | 'escalated' | 'abandoned';
  detect: number;
  decide: number;
  restart: number;
  reconnect: number;
}

export interface EttrView {
  settings: EttrSettings;
  jobId: string | null;
  mode: string | null;
  startedAt: number | null;
  /** Time accounted up to (the last event's time, or a later `now`). */
  clock: number | null;
  machines: Record<string, MachineView>;
  outages: Record<string, Outage>;
  /** recoveryId → outageId */
  recoveries: Record<string, string>;
  effectiveGpuMs: number;
  totalGpuMs: number;
  /** Keyed `${category}|${outageId ?? ''}|${machineId}`. */
  ledger: Record<string, LedgerEntry>;
  buckets: Bucket[];
  stages: StageSample[];
  /** Step boundaries: rollout work before the last TrainingStepStarted is consumed when that step completes. */
  stepStartedAt: number | null;
  steps: number;
  /**
   * Machines the job started with (JobStarted: trainers + rollouts), and how many of them registered: the
   * job holds a machine from its start, so one that registers late was starting up all along — charged
   * `startup` back to the job's start. Replacements take a slot instead and start from their registration.
   */
  declaredMachines: number;
  arrivedMachines: number;
  /** Derived from the machines and outages above, so that an event costs what it changes (see `EttrIndex`). */
  index: EttrIndex;
}

/**
 * What the incremental accounting keeps beside the view's facts: an event accounts the time
 * since the previous one for the job as a whole from the GPU totals here, and touches only the machines
 * it changes. Machines are objects of `machines` (a structured clone keeps them shared).
 */
/**
 * An idle machine is not effective when the other side cannot give it work: a task restart is open, or
 * no machine of the other side serves — waiting on a dead role when an outage of that side is open,
 * startup when none is (the other side has not come up yet). While one machine of the other side
 * serves, an idle machine is the pipeline at work (fewer engines make batches more slowly; the
 * machines that are down are charged themselves).
 */
export type IdleWait = { category: 'waiting-on-dead-role' | 'startup'; outageId: string | null } | null;

export interface EttrIndex {
  /** Outages not closed yet, in the order they opened (the order an idle machine's blocker is searched in). */
  open: Map<string, Outage>;
  /** What an idle machine of each side (trainer: trainer or hybrid) counts as now: effective (null), or the wait it is in. */
  waits: Record<'trainer' | 'rollout', IdleWait>;
  /** Machines of each side, and those serving: not held by an outage and past initialising. */
  members: Record<'trainer' | 'rollout', number>;
  serving: Record<'trainer' | 'rollout', number>;
  /** Outage id → the machines it holds. */
  held: Map<string, Set<MachineView>>;
  /** Idle machines no outage holds: how they count depends on the blocking outage of their role. */
  idle: Set<MachineView>;
  /** Machines of the trainer group (role trainer or hybrid): a trainer fault holds those not held already. */
  trainers: Set<MachineView>;
  /** GPUs of every machine, and of those effective now (`countsGpus` summed). */
  gpus: number;
  effectiveGpus: number;
}
