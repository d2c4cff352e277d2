import type { MessageOf } from '@robustrl/contracts';
import type { Projection } from '@robustrl/domain-kit';
import { DEFAULT_ETTR_SETTINGS, EttrSettings, EttrView, MachineView, Outage } from './ettr-view';
import {
  addMachine,
  advance,
  chargeUnaccounted,
  emptyIndex,
  heldBy,
  openOutage,
  outagesChanged,
  reclassify,
  recount,
  removeMachine,
  setHeldBy,
  settle,
  settleAll,
} from './time-accounting';

/** The messages the ETTR projection folds; everything else is ignored. */
export const ETTR_INPUT_TYPES = [
  'JobStarted',
  'MachineRegistered',
  'MachineRoleChanged',
  'MachineDeregistered',
  'RolePhaseChanged',
  'FaultConfirmed',
  'RecoveryDecided',
  'RestartTrainerGroup',
  'RestartRolloutEngine',
  'PromoteRolloutToTrainer',
  'ReplaceMachine',
  'RestartTask',
  'RecoveryCompleted',
  'TrainingStepStarted',
  'TrainingStepCompleted',
] as const;
export type EttrInput = MessageOf<(typeof ETTR_INPUT_TYPES)[number]>;

/** Signals that announce a machine's departure before it happens (a drain, a preemption notice): their outages are planned. */
const PLANNED_SIGNALS: ReadonlySet<string> = new Set(['node-draining']);

const timeOf = (iso: string) => Date.parse(iso);
const isTrainer = (m: MachineView) => m.role !== 'rollout';

/**
 * ETTR of one job as a projection over its events (see ettr-view.ts for the definition).
 *
 * Time is the events' `occurredAt`: before an event is applied, every machine's GPU time since the
 * previous event is accounted in the state the machines were in. Two facts arrive after the time they
 * concern and are corrected backwards: a verdict names when its fault began (the detection window was
 * not effective), and a task restart throws away the rollout work of the batch in progress.
 *
 * `evolve` returns the next view and may reuse the previous view's storage: a fold keeps only the
 * latest view (the projection runs over hundreds of thousands of simulated events). An event costs what
 * it changes, not the job's size (see time-accounting.ts): a machine is settled before it changes and
 * recounted after.
 */
export function createEttrProjection(settings: Partial<EttrSettings> = {}): Projection<EttrView, EttrInput> {
  const resolved = { ...DEFAULT_ETTR_SETTINGS, ...settings };
  if (resolved.windowMs % resolved.sampleMs !== 0)
    throw new Error(`the ETTR window (${resolved.windowMs} ms) must be a multiple of the sample period (${resolved.sampleMs} ms)`);
  return {
    initialView: () => emptyView(resolved),
    evolve: (view, event) => {
      const at = timeOf(event.occurredAt);
      if (Number.isFinite(at) && view.startedAt !== null) advance(view, at);
      apply(view, event, at);
      return view;
    },
  };
}

export function emptyView(settings: EttrSettings = DEFAULT_ETTR_SETTINGS): EttrView {
  return {
    settings,
    jobId: null,
    mode: null,
    startedAt: null,
    clock: null,
    machines: {},
    outages: {},
    recoveries: {},
    effectiveGpuMs: 0,
    totalGpuMs: 0,
    ledger: {},
    buckets: [],
    stages: [],
    stepStartedAt: null,
    steps: 0,
    declaredMachines: 0,
    arrivedMachines: 0,
    index: emptyIndex(),
  };
}

function apply(view: EttrView, event: EttrInput, at: number): void {
  switch (event.type) {
    case 'JobStarted':
      if (view.startedAt === null) {
        view.startedAt = at;
        view.clock = at;
        view.jobId = event.jobId;
        view.declaredMachines = event.data.trainerMachines + event.data.rolloutMachines;
      }
      view.mode = event.data.mode;
      return;
    case 'MachineRegistered': {
      const d = event.data;
      const prior = view.machines[d.machineId];
      if (prior) {
        // The same machine again: its agent restarted. Still held by its outage until it works.
        settle(view, prior);
        Object.assign(prior, { role: d.role, gpus: d.gpus, phase: 'initializing', ghost: false });
        if (prior.restartOrdered) prior.reportedSinceRestart = true;
        recount(view, prior);
        return;
      }
      const m = newMachine(d.machineId, d.role, d.gpus);
      addMachine(view, m);
      if (!takeOverSlot(view, m)) arrived(view, m, at);
      return;
    }
    case 'MachineRoleChanged': {
      const m = view.machines[event.data.machineId];
      if (!m) return;
      settle(view, m);
      m.role = event.data.to;
      recount(view, m);
      return;
    }
    case 'MachineDeregistered': {
      const m = view.machines[event.data.machineId];
      if (!m) return;
      // A machine taken out by an outage keeps its slot (counted down) until its replacement works.
      if (m.heldBy && view.outages[m.heldBy]?.closedAt === null) m.ghost = true;
      else removeMachine(view, m);
      return;
    }
    case 'RolePhaseChanged': {
      const m = view.machines[event.data.machineId];
      if (!m) return;
      settle(view, m);
      m.phase = event.data.phase;
      if (m.heldBy && m.restartOrdered) {
        m.reportedSinceRestart = true;
        if (event.data.phase !== 'initializing') release(view, m, at);
      }
      recount(view, m);
      return;
    }
    case 'FaultConfirmed': {
      const d = event.data;
      if (view.outages[d.verdictId]) return;
      const o: Outage = {
        outageId: d.verdictId,
        recoveryId: null,
        machineId: d.machineId,
        handledAs: d.handledAs,
        detectionRule: d.rule,
        planned: d.evidence.signal !== undefined && PLANNED_SIGNALS.has(d.evidence.signal),
        action: null,
        decisionRule: null,
        startedAt: at - d.detectionLatencyMs,
        confirmedAt: at,
        awaitingReplacement: [],
        taskRestart: false,
        closedAt: null,
      };
      view.outages[o.outageId] = o;
      openOutage(view, o);
      // A trainer machine that announced its departure trains on until its group moves: the decision to
      // move it holds the group (docs/planned-failures.md "A trainer moves at its checkpoint").
      if (o.planned && d.handledAs === 'trainer') return;
      // A trainer fault stops the whole trainer group (its ranks hang on the dead one); a rollout fault, its machine.
      const hit = d.handledAs === 'trainer' ? trainersToHold(view) : [view.machines[d.machineId]].filter(Boolean);
      if (!view.machines[d.machineId] && d.handledAs === 'rollout') return;
      for (const m of hit) {
        if (heldByOpenOutage(view, m)) continue; // already down for another fault
        settle(view, m);
        const effectiveSince = m.effectiveSince;
        hold(view, m, o);
        if (effectiveSince !== null) reclassify(view, m, Math.max(o.startedAt, effectiveSince), at, 'detection', o.outageId);
      }
      return;
    }
    case 'RecoveryDecided': {
      const d = event.data;
      const o = view.outages[d.verdictId];
      if (!o) return;
      o.recoveryId = d.recoveryId;
      o.action = d.action;
      o.decisionRule = d.rule;
      view.recoveries[d.recoveryId] = o.outageId;
      if (d.action === 'report-only') close(view, o, at);
      else if (d.action === 'restart-task') startTaskRestart(view, o);
      else if (o.planned && o.handledAs === 'trainer' && d.handover?.status !== 'waiting') {
        // The group moves now (at once, or its handover ended): from here it is down.
        for (const m of trainersToHold(view)) if (!heldByOpenOutage(view, m)) hold(view, m, o);
      }
      return;
    }
    case 'RestartTask': {
      const o = outageOf(view, event.data.recoveryId);
      if (!o) return;
      startTaskRestart(view, o);
      // The batch being generated is lost: its rollouts are re-executed after the restart.
      for (const m of Object.values(view.machines)) {
        settle(view, m);
        for (const [from, to] of m.atRisk) reclassify(view, m, from, to, 'lost-rollout', o.outageId);
        m.atRisk = [];
        orderRestart(view, m, o);
      }
      return;
    }
    case 'RestartTrainerGroup': {
      const o = outageOf(view, event.data.recoveryId);
      if (!o) return;
      for (const id of event.data.machines) {
        const m = view.machines[id];
        if (!m) continue;
        if (!m.heldBy) hold(view, m, o);
        if (m.heldBy === o.outageId) orderRestart(view, m, o);
      }
      return;
    }
    case 'RestartRolloutEngine': {
      const o = outageOf(view, event.data.recoveryId);
      const m = view.machines[event.data.machineId];
      if (!o || !m || o.closedAt !== null) return;
      // The engine restarts in place on its machine: the new engine's first working phase ends the outage.
      if (!m.heldBy) hold(view, m, o);
      if (m.heldBy === o.outageId) orderRestart(view, m, o);
      return;
    }
    case 'PromoteRolloutToTrainer': {
      const o = outageOf(view, event.data.recoveryId);
      const m = view.machines[event.data.rolloutMachineId];
      if (!o || !m) return;
      // The standby stops serving rollouts and becomes a trainer rank of the restarting group.
      if (!m.heldBy) hold(view, m, o);
      orderRestart(view, m, o);
      return;
    }
    case 'ReplaceMachine': {
      const own = outageOf(view, event.data.recoveryId);
      if (!own) return;
      // An outage a task restart subsumed (closed by it): the replacement is the restart's to wait for.
      const o = own.closedAt === null ? own : (openTaskRestart(view) ?? own);
      // A replacement asked for again (the first request failed) is still one machine to replace: a second
      // slot would be taken by the next unrelated machine to register, leaving the outage it belongs to open.
      if (!o.awaitingReplacement.some((r) => r.machineId === event.data.machineId))
        o.awaitingReplacement.push({ machineId: event.data.machineId, role: event.data.role });
      const m = view.machines[event.data.machineId];
      if (m && !m.heldBy) hold(view, m, o);
      return;
    }
    case 'RecoveryCompleted': {
      const d = event.data;
      const o = outageOf(view, d.recoveryId);
      view.stages.push({ recoveryId: d.recoveryId, action: o?.action ?? null, outcome: d.outcome, ...d.stagesMs });
      return;
    }
    case 'TrainingStepStarted':
      view.stepStartedAt = at;
      return;
    case 'TrainingStepCompleted': {
      // The step consumed the rollouts generated before it started; later ones feed the next batch.
      const consumedBefore = view.stepStartedAt ?? at;
      settleAll(view);
      for (const m of Object.values(view.machines)) {
        m.atRisk = m.atRisk.filter(([, to]) => to > consumedBefore).map(([from, to]) => [Math.max(from, consumedBefore), to]);
      }
      view.steps += 1;
      return;
    }
  }
}

const heldByOpenOutage = (view: EttrView, m: MachineView) => m.heldBy !== null && view.outages[m.heldBy]?.closedAt === null;

/**
 * The trainer machines a trainer fault may hold, in the machine table's order (the order the detection
 * window is taken back in). Usually the group is down already (its ranks hang on the first dead one)
 * and the many verdicts that follow find none or one: looked for among the trainers, not every machine.
 */
function trainersToHold(view: EttrView): MachineView[] {
  let free = 0;
  for (const m of view.index.trainers) if (!heldByOpenOutage(view, m) && ++free > 1) break;
  if (free === 0) return [];
  if (free === 1) return [...view.index.trainers].filter((m) => !heldByOpenOutage(view, m));
  return Object.values(view.machines).filter(isTrainer);
}

function newMachine(machineId: string, role: MachineView['role'], gpus: number): MachineView {
  return {
    machineId,
    role,
    gpus,
    phase: null,
    heldBy: null,
    restartOrdered: false,
    reportedSinceRestart: false,
    effectiveSince: null,
    ghost: false,
    atRisk: [],
    accountedTo: null,
    countsAs: null,
    countsGpus: 0,
    countsGenerating: false,
    countsSide: null,
    countsServing: false,
  };
}

function outageOf(view: EttrView, recoveryId: string): Outage | undefined {
  const id = view.recoveries[recoveryId];
  return id ? view.outages[id] : undefined;
}

function hold(view: EttrView, m: MachineView, o: Outage): void {
  settle(view, m);
  setHeldBy(view, m, o.outageId);
  m.restartOrdered = false;
  m.reportedSinceRestart = false;
  m.effectiveSince = null;
  recount(view, m);
}

function orderRestart(view: EttrView, m: MachineView, o: Outage): void {
  if (m.heldBy !== o.outageId) hold(view, m, o);
  m.restartOrdered = true;
  m.reportedSinceRestart = false;
  recount(view, m);
}

function startTaskRestart(view: EttrView, o: Outage): void {
  o.taskRestart = true;
  outagesChanged(view);
  for (const m of Object.values(view.machines)) {
    if (m.heldBy === o.outageId) continue;
    const other = m.heldBy ? view.outages[m.heldBy] : undefined;
    if (other && other.closedAt === null && other !== o) {
      // The task restart subsumes it, and the replacements it waits for: a new machine takes the lost
      // one's slot in the restart, which ends once that machine works, not never.
      o.awaitingReplacement.push(...other.awaitingReplacement.filter((r) => !o.awaitingReplacement.some((a) => a.machineId === r.machineId)));
      other.awaitingReplacement = [];
      close(view, other, view.clock ?? 0);
    }
    hold(view, m, o);
    // Re-held machines keep no effective streak: nothing to reach back to.
  }
}

/** The task restart in progress, if any. */
function openTaskRestart(view: EttrView): Outage | undefined {
  for (const o of view.index.open.values()) if (o.taskRestart) return o;
  return undefined;
}

/** A new machine of the role an outage waits a replacement for takes over the replaced machine's slot. */
function takeOverSlot(view: EttrView, m: MachineView): boolean {
  for (const o of view.index.open.values()) {
    const i = o.awaitingReplacement.findIndex((r) => r.role === m.role || (r.role !== 'rollout' && m.role !== 'rollout'));
    if (i < 0) continue;
    const [replaced] = o.awaitingReplacement.splice(i, 1);
    const old = view.machines[replaced.machineId];
    if (old && old.heldBy !== null && old.machineId !== m.machineId) {
      // It may be down for an earlier outage still (a replacement lost before it ever worked): it leaves
      // that outage, which is over once it holds and awaits nothing.
      const holder = view.outages[old.heldBy];
      if (old.ghost) removeMachine(view, old);
      else {
        // Isolated but still registered: its own accounting resumes.
        settle(view, old);
        setHeldBy(view, old, null);
        recount(view, old);
      }
      if (holder && holder !== o && holder.closedAt === null && holder.awaitingReplacement.length === 0 && heldBy(view, holder.outageId).size === 0) {
        holder.closedAt = view.clock ?? 0;
        outagesChanged(view);
      }
    }
    hold(view, m, o);
    // Its registration is the new process reporting in: it initialises from here.
    m.restartOrdered = true;
    m.reportedSinceRestart = true;
    m.phase = 'initializing';
    recount(view, m);
    return true;
  }
  return false;
}

/** A machine of the job's start registered (not a replacement): it was starting up since the job began. */
function arrived(view: EttrView, m: MachineView, at: number): void {
  if (view.arrivedMachines >= view.declaredMachines || view.startedAt === null) return;
  view.arrivedMachines += 1;
  chargeUnaccounted(view, m, view.startedAt, at, 'startup');
}

/** A held machine reported work after its restart: it is back. The outage ends when none is held. */
function release(view: EttrView, m: MachineView, at: number): void {
  const o = view.outages[m.heldBy!];
  settle(view, m);
  setHeldBy(view, m, null);
  m.restartOrdered = false;
  m.reportedSinceRestart = false;
  recount(view, m);
  if (!o) return;
  if (heldBy(view, o.outageId).size === 0 && o.awaitingReplacement.length === 0) {
    o.closedAt = at;
    outagesChanged(view);
  }
}

function close(view: EttrView, o: Outage, at: number): void {
  o.closedAt = at;
  outagesChanged(view);
  for (const m of [...heldBy(view, o.outageId)]) {
    if (m.ghost) removeMachine(view, m);
    else {
      settle(view, m);
      setHeldBy(view, m, null);
      m.restartOrdered = false;
      recount(view, m);
    }
  }
}

/** Accounts up to `now` (a copy: the view itself stays at its last event), every machine settled. */
export function viewAt(view: EttrView, now: number): EttrView {
  const copy: EttrView = structuredClone(view);
  if (copy.startedAt !== null && copy.clock !== null && now > copy.clock) advance(copy, now);
  settleAll(copy);
  return copy;
}
