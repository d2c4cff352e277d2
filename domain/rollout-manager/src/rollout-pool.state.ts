import type { Draft, MessageOf } from '@robustrl/contracts';
import type { JobCommand } from '@robustrl/domain-kit';
import { PoolTrajectory, Trajectories, TrajectoryTable } from './trajectory-table';

export type { PoolTrajectory } from './trajectory-table';
import { holdsWeights } from './weight-readiness';

/**
 * The rollout pool of one job (paper §3 RolloutManager, §5.2.2): which rollout instances serve, which
 * trajectories each has in flight, and where those go when an instance stops serving.
 *
 * Instances are identified by rollout id (a machine may run several, one per DP rank, named
 * `<machineId>` or `<machineId>/<rank>`); throughput samples tell which machine an instance is on.
 */
export const ROLLOUT_POOL_INPUT_TYPES = [
  'MachineRegistered',
  'MachineDeregistered',
  'MachineRoleChanged',
  'RolloutThroughputSampled',
  'FaultConfirmed',
  'PromoteRolloutToTrainer',
  'TrajectoryTurnAppended',
  'TrajectoryTurnsAppended',
  'TrajectoryStatusChanged',
  'RelayJoined',
  'WeightVersionPublished',
] as const;
export const ROLLOUT_POOL_OUTPUT_TYPES = ['TrajectoriesReassigned'] as const;
export type RolloutPoolInput = MessageOf<(typeof ROLLOUT_POOL_INPUT_TYPES)[number]>;
export type RolloutPoolEvent = MessageOf<(typeof ROLLOUT_POOL_INPUT_TYPES)[number] | (typeof ROLLOUT_POOL_OUTPUT_TYPES)[number]>;
export type RolloutPoolCommand = JobCommand<RolloutPoolInput>;
/** What decide returns: an output before the host envelopes it. */
export type RolloutPoolDraft = Draft<(typeof ROLLOUT_POOL_OUTPUT_TYPES)[number]>;

export interface PoolMachine {
  machineId: string;
  zone: string;
  hardwareClass: string;
  dpRank: number | null;
  /** `lent`: promoted into the trainer group; `down`: confirmed faulty or gone. */
  status: 'serving' | 'lent' | 'down';
  /** For a lent machine, whether the replacement asked for the pool has joined. */
  lentTo: string | null;
  /** The newest weight version the machine holds whole (it relays it), null before its first. */
  weightVersion: number | null;
  /** Whether it takes part in weight transfer (it registered a weight server), so `weightVersion` is known. */
  weightsTracked: boolean;
  /** Its inference engine's base URL, when it told one: what the router routes to. */
  inferenceUrl: string | null;
  /** The engines it hosts when it told several (each its own id and URL); absent: the one of `inferenceUrl`. */
  engines?: Array<{ engineId: string; url: string }>;
  /**
   * A machine that announced its departure (a notice's verdict, docs/planned-failures.md): when it goes.
   * It is `down` — no new trajectories, its in-flight ones reassigned — but its engines finish the
   * requests they hold until shortly before then (the router drains them).
   */
  departsAt?: string;
  /** The agent process that registered it and its weight server (absent from older snapshots and agents). */
  agent?: { incarnation: string | null; weightsAddress: string | null };
}

/**
 * The weights a rollout holds after it registers (again), as the weight registry decides them: a
 * serving machine's registration from the same agent process and weight server (its engine restarted
 * in place) keeps them; a new agent process — which may register before any verdict saw the old one go
 * (a task restart) — serves none of its predecessor's, nor does a machine that was down, lent or unknown.
 */
export function weightsAfterRegistration(prior: PoolMachine | undefined, d: { incarnation?: string; weightsAddress?: string }): number | null {
  if (!prior || prior.status !== 'serving') return null;
  const same = prior.agent !== undefined && prior.agent.incarnation === (d.incarnation ?? null) && prior.agent.weightsAddress === (d.weightsAddress ?? null);
  return same ? prior.weightVersion : null;
}

export const agentOf = (d: { incarnation?: string; weightsAddress?: string }) => ({
  incarnation: d.incarnation ?? null,
  weightsAddress: d.weightsAddress ?? null,
});

/** A trajectory leaving an instance that stopped serving, and why. */
export interface MovingTrajectory {
  trajectoryId: string;
  fromRolloutId: string;
  reason: string;
}

/** The pool's facts: what it folds from its inputs (the full-recompute reference the specs hold it to keeps just these). */
export interface RolloutPoolData {
  machines: Record<string, PoolMachine>;
  /** rollout id → machine id, learned from throughput samples (else the id's head before '/'). */
  instanceMachine: Record<string, string>;
  /** In flight (finished ones are dropped), sharded: see trajectory-table.ts. */
  trajectories: TrajectoryTable;
  /** Trajectories whose instance stopped serving when no other was alive. */
  orphans: MovingTrajectory[];
  /** Lent machines waiting for the rollout that refills the pool. */
  awaitingRefill: string[];
  /** The trainer's newest published weight version, null before the first: what "holds weights" is judged by. */
  publishedVersion: number | null;
}

export interface RolloutPoolState extends RolloutPoolData {
  /**
   * The machine the input folded last took out of serving, else null. The pool evolves in place, so
   * its decision on an input reads the state with the input in: this is what tells "it stopped serving
   * now" from "it was not serving already" (a redelivered verdict).
   */
  stoppedServing: string | null;
}

export const initialRolloutPoolState = (): RolloutPoolState => ({
  machines: {},
  instanceMachine: {},
  trajectories: Trajectories.empty(),
  orphans: [],
  awaitingRefill: [],
  publishedVersion: null,
  stoppedServing: null,
});

export const machineOfInstance = (state: RolloutPoolData, rolloutId: string) => state.instanceMachine[rolloutId] ?? rolloutId.split('/')[0];
export const isActive = (t: PoolTrajectory) => t.status === 'in-flight' || t.status === 'reassigned';

/** Whether trajectories may move to the machine: it serves and holds weights (a fresh one waits for its first pull). */
export function takesWork(state: RolloutPoolData, machine: PoolMachine | undefined): boolean {
  return machine?.status === 'serving' && holdsWeights(machine, state.publishedVersion ?? null);
}

/** The instances trajectories may move to: on machines that serve and hold weights. */
export function servingInstances(state: RolloutPoolData): string[] {
  const instances = new Set<string>();
  for (const [rolloutId, machineId] of Object.entries(state.instanceMachine)) if (takesWork(state, state.machines[machineId])) instances.add(rolloutId);
  // A serving machine no sample has named an instance for yet serves under its own id. (The named
  // machines as a set: searching the instance table once per machine made this O(N²) on every stop.)
  const named = new Set(Object.values(state.instanceMachine));
  for (const m of Object.values(state.machines)) if (takesWork(state, m) && !named.has(m.machineId)) instances.add(m.machineId);
  return [...instances].sort();
}

/** Everything in flight on the instances of `machineId`, which just stopped serving. */
export function stranded(state: RolloutPoolData, machineId: string, reason: string): MovingTrajectory[] {
  return Trajectories.all(state.trajectories)
    .filter((t) => t.owner !== null && isActive(t) && machineOfInstance(state, t.owner) === machineId)
    .sort((a, b) => a.trajectoryId.localeCompare(b.trajectoryId))
    .map((t) => ({ trajectoryId: t.trajectoryId, fromRolloutId: t.owner!, reason }));
}
