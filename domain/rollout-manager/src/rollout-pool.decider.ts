import { Decider } from '@robustrl/domain-kit';
import { Draft, draft, MessageOf } from '@robustrl/contracts';
import { Trajectories, TrajectoryTable } from './trajectory-table';

/**
 * The rollout pool of one job (paper §3 RolloutManager, §5.2.2): which rollout instances serve, which
 * trajectories each has in flight, and where those go when an instance stops serving — its machine
 * confirmed dead, isolated, or lent to the trainer as warm standby. A trajectory moves with its
 * preserved prefix: it resumes from the turn after its last stored one on the least loaded living
 * instance. Trajectories with nowhere to go wait for the next instance to join.
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
  'TrajectoryStatusChanged',
  'RelayJoined',
] as const;
export const ROLLOUT_POOL_OUTPUT_TYPES = ['TrajectoriesReassigned'] as const;
export type RolloutPoolInput = MessageOf<(typeof ROLLOUT_POOL_INPUT_TYPES)[number]>;
export type RolloutPoolEvent = MessageOf<(typeof ROLLOUT_POOL_INPUT_TYPES)[number] | (typeof ROLLOUT_POOL_OUTPUT_TYPES)[number]>;
export type RolloutPoolCommand = { kind: 'observe'; message: RolloutPoolInput; now: number } | { kind: 'tick'; now: number };

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
}

export interface PoolTrajectory {
  trajectoryId: string;
  owner: string | null;
  lastTurnIndex: number;
  status: 'in-flight' | 'completed' | 'reassigned' | 'aborted';
}

export interface RolloutPoolState {
  machines: Record<string, PoolMachine>;
  /** rollout id → machine id, learned from throughput samples (else the id's head before '/'). */
  instanceMachine: Record<string, string>;
  /** In flight (finished ones are dropped), sharded: see trajectory-table.ts. */
  trajectories: TrajectoryTable;
  /** Trajectories whose instance stopped serving when no other was alive. */
  orphans: Array<{ trajectoryId: string; fromRolloutId: string; reason: string }>;
  /** Lent machines waiting for the rollout that refills the pool. */
  awaitingRefill: string[];
}

const machineOfInstance = (state: RolloutPoolState, rolloutId: string) => state.instanceMachine[rolloutId] ?? rolloutId.split('/')[0];
const isActive = (t: PoolTrajectory) => t.status === 'in-flight' || t.status === 'reassigned';

export function createRolloutPoolDecider(): Decider<RolloutPoolState, RolloutPoolCommand, RolloutPoolEvent, Draft> {
  function servingInstances(state: RolloutPoolState): string[] {
    const instances = new Set<string>();
    for (const [rolloutId, machineId] of Object.entries(state.instanceMachine)) if (state.machines[machineId]?.status === 'serving') instances.add(rolloutId);
    // A serving machine no sample has named an instance for yet serves under its own id.
    for (const m of Object.values(state.machines)) if (m.status === 'serving' && !Object.values(state.instanceMachine).includes(m.machineId)) instances.add(m.machineId);
    return [...instances].sort();
  }

  function load(state: RolloutPoolState): Map<string, number> {
    const counts = new Map<string, number>(servingInstances(state).map((i) => [i, 0]));
    for (const t of Trajectories.all(state.trajectories)) if (t.owner && isActive(t) && counts.has(t.owner)) counts.set(t.owner, counts.get(t.owner)! + 1);
    return counts;
  }

  /** Spread trajectories over the least loaded serving instances, one at a time, so the load stays even. */
  function assign(state: RolloutPoolState, moving: Array<{ trajectoryId: string; fromRolloutId: string; reason: string }>): Draft[] {
    const counts = load(state);
    for (const m of moving) counts.delete(m.fromRolloutId);
    if (counts.size === 0 || moving.length === 0) return [];
    const byFrom = new Map<string, { reason: string; assignments: Array<{ trajectoryId: string; toRolloutId: string; resumeFromTurn: number }> }>();
    for (const m of moving) {
      const [toRolloutId] = [...counts.entries()].sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0]))[0];
      counts.set(toRolloutId, counts.get(toRolloutId)! + 1);
      const t = Trajectories.get(state.trajectories, m.trajectoryId);
      const entry = byFrom.get(m.fromRolloutId) ?? { reason: m.reason, assignments: [] };
      entry.assignments.push({ trajectoryId: m.trajectoryId, toRolloutId, resumeFromTurn: t ? t.lastTurnIndex + 1 : 0 });
      byFrom.set(m.fromRolloutId, entry);
    }
    return [...byFrom.entries()].map(([fromRolloutId, e]) => draft('TrajectoriesReassigned', { fromRolloutId, reason: e.reason, assignments: e.assignments }));
  }

  /** Everything in flight on the instances of `machineId`, which just stopped serving. */
  function stranded(state: RolloutPoolState, machineId: string, reason: string) {
    return Trajectories.all(state.trajectories)
      .filter((t) => t.owner !== null && isActive(t) && machineOfInstance(state, t.owner) === machineId)
      .sort((a, b) => a.trajectoryId.localeCompare(b.trajectoryId))
      .map((t) => ({ trajectoryId: t.trajectoryId, fromRolloutId: t.owner!, reason }));
  }

  function stopsServing(state: RolloutPoolState, machineId: string, reason: string): Draft[] {
    const machine = state.machines[machineId];
    if (!machine || machine.status !== 'serving') return [];
    const after = evolveMachine(state, { ...machine, status: 'down' });
    return assign(after, stranded(state, machineId, reason));
  }

  function decide(command: RolloutPoolCommand, state: RolloutPoolState): Draft[] {
    if (command.kind === 'tick') return [];
    const m = command.message;
    switch (m.type) {
      case 'FaultConfirmed':
        return m.data.handledAs === 'rollout' || m.data.role === 'rollout' ? stopsServing(state, m.data.machineId, `rollout ${m.data.machineId} confirmed faulty (${m.data.rule})`) : [];
      case 'MachineDeregistered':
        return stopsServing(state, m.data.machineId, `rollout ${m.data.machineId} left: ${m.data.reason}`);
      case 'PromoteRolloutToTrainer':
        return stopsServing(state, m.data.rolloutMachineId, `rollout ${m.data.rolloutMachineId} lent to the trainer as warm standby for ${m.data.replacesMachineId}`);
      case 'MachineRoleChanged':
        return m.data.from === 'rollout' && m.data.to !== 'rollout' ? stopsServing(state, m.data.machineId, `rollout ${m.data.machineId} became ${m.data.to}: ${m.data.reason}`) : [];
      case 'MachineRegistered': {
        if (m.data.role !== 'rollout' || state.orphans.length === 0) return [];
        const after = evolve(state, m);
        return assign(after, after.orphans.filter((o) => {
          const t = Trajectories.get(after.trajectories, o.trajectoryId);
          return t !== undefined && isActive(t);
        }));
      }
      default:
        return [];
    }
  }

  function evolveMachine(state: RolloutPoolState, machine: PoolMachine): RolloutPoolState {
    return { ...state, machines: { ...state.machines, [machine.machineId]: machine } };
  }

  function evolve(state: RolloutPoolState, event: RolloutPoolEvent): RolloutPoolState {
    switch (event.type) {
      case 'MachineRegistered': {
        if (event.data.role !== 'rollout') return state;
        const d = event.data;
        let next = evolveMachine(state, { machineId: d.machineId, zone: d.zone, hardwareClass: d.hardwareClass, dpRank: d.dpRank, status: 'serving', lentTo: null, weightVersion: null });
        // The first rollout to join after a lend refills the pool for it.
        if (next.awaitingRefill.length > 0) {
          const [lent, ...rest] = next.awaitingRefill;
          const lentMachine = next.machines[lent];
          if (lentMachine) next = evolveMachine(next, { ...lentMachine, lentTo: d.machineId });
          next = { ...next, awaitingRefill: rest };
        }
        return next;
      }
      case 'MachineDeregistered':
      case 'FaultConfirmed': {
        if (event.type === 'FaultConfirmed' && event.data.handledAs !== 'rollout' && event.data.role !== 'rollout') return state;
        const machine = state.machines[event.data.machineId];
        return machine && machine.status === 'serving' ? evolveMachine(state, { ...machine, status: 'down' }) : state;
      }
      case 'PromoteRolloutToTrainer': {
        const machine = state.machines[event.data.rolloutMachineId];
        if (!machine || machine.status === 'lent') return state;
        return { ...evolveMachine(state, { ...machine, status: 'lent' }), awaitingRefill: [...state.awaitingRefill, machine.machineId] };
      }
      case 'MachineRoleChanged': {
        const machine = state.machines[event.data.machineId];
        if (!machine || event.data.from !== 'rollout' || event.data.to === 'rollout') return state;
        return machine.status === 'serving' ? evolveMachine(state, { ...machine, status: 'lent' }) : state;
      }
      case 'RolloutThroughputSampled':
        return state.instanceMachine[event.data.rolloutId] === event.data.machineId
          ? state
          : { ...state, instanceMachine: { ...state.instanceMachine, [event.data.rolloutId]: event.data.machineId } };
      case 'RelayJoined': {
        // An instance that holds a whole version serves it to others (paper §5.2.1 ➂): its machine has it.
        const machine = state.machines[machineOfInstance(state, event.data.instanceId)];
        if (!machine || (machine.weightVersion ?? -1) >= event.data.version) return state;
        return evolveMachine(state, { ...machine, weightVersion: event.data.version });
      }
      case 'TrajectoryTurnAppended': {
        const d = event.data;
        const prior = Trajectories.get(state.trajectories, d.trajectoryId);
        const t: PoolTrajectory = {
          trajectoryId: d.trajectoryId,
          // Model output is what ties a trajectory to the instance generating it.
          owner: d.rolloutId ?? prior?.owner ?? null,
          lastTurnIndex: Math.max(prior?.lastTurnIndex ?? -1, d.turnIndex),
          status: prior?.status ?? 'in-flight',
        };
        return { ...state, trajectories: Trajectories.set(state.trajectories, t) };
      }
      case 'TrajectoryStatusChanged': {
        if (event.data.status === 'completed' || event.data.status === 'aborted') {
          // Finished trajectories never move again: forget them, so the state is what is in flight (a
          // long job would otherwise keep every trajectory it ever ran, and copy them on every event).
          if (!Trajectories.get(state.trajectories, event.data.trajectoryId)) return state;
          const trajectories = Trajectories.remove(state.trajectories, event.data.trajectoryId);
          return { ...state, trajectories, orphans: state.orphans.filter((o) => o.trajectoryId !== event.data.trajectoryId) };
        }
        const prior = Trajectories.get(state.trajectories, event.data.trajectoryId);
        const t: PoolTrajectory = prior ? { ...prior, status: event.data.status } : { trajectoryId: event.data.trajectoryId, owner: null, lastTurnIndex: -1, status: event.data.status };
        return { ...state, trajectories: Trajectories.set(state.trajectories, t) };
      }
      case 'TrajectoriesReassigned': {
        const moved: PoolTrajectory[] = [];
        for (const a of event.data.assignments) {
          const prior = Trajectories.get(state.trajectories, a.trajectoryId);
          if (prior) moved.push({ ...prior, owner: a.toRolloutId, status: 'reassigned' });
        }
        const trajectories = Trajectories.setMany(state.trajectories, moved);
        // Stranded trajectories that found no instance wait as orphans; assigned ones stop being orphans.
        const assigned = new Set(event.data.assignments.map((a) => a.trajectoryId));
        return { ...state, trajectories, orphans: state.orphans.filter((o) => !assigned.has(o.trajectoryId)) };
      }
    }
  }

  return {
    initialState: () => ({ machines: {}, instanceMachine: {}, trajectories: Trajectories.empty(), orphans: [], awaitingRefill: [] }),
    decide,
    evolve: (state, event) => {
      const before = state;
      const after = evolve(state, event);
      // A machine that stops serving with nowhere to move its trajectories leaves orphans behind.
      if (event.type === 'FaultConfirmed' || event.type === 'MachineDeregistered' || event.type === 'PromoteRolloutToTrainer' || event.type === 'MachineRoleChanged') {
        const machineId = event.type === 'PromoteRolloutToTrainer' ? event.data.rolloutMachineId : event.data.machineId;
        if (before.machines[machineId]?.status === 'serving' && after.machines[machineId]?.status !== 'serving' && servingInstances(after).length === 0) {
          const lost = stranded(before, machineId, `rollout ${machineId} stopped serving with no other rollout alive`);
          return { ...after, orphans: [...after.orphans, ...lost.filter((l) => !after.orphans.some((o) => o.trajectoryId === l.trajectoryId))] };
        }
      }
      return after;
    },
  };
}

export const RolloutPoolDecider = createRolloutPoolDecider();
