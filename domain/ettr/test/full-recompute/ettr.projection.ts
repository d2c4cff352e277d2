/**
 * The fold of the full-recompute ETTR projection (see ettr-view.ts): before each event every machine is
 * accounted (time-accounting.ts `advance`), and the outages an event concerns are looked for among all
 * of them. Its inputs are the live projection's (`EttrInput`).
 */
import type { Projection } from '@robustrl/domain-kit';
import type { EttrInput } from '../../src/ettr.projection';
import { chargeUnaccounted, reclassify } from '../../src/time-accounting';
import { DEFAULT_ETTR_SETTINGS, EttrSettings, EttrView, MachineView, Outage } from './ettr-view';
import { advance } from './time-accounting';

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
 * latest view (the projection runs over hundreds of thousands of simulated events).
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
        Object.assign(prior, { role: d.role, gpus: d.gpus, phase: 'initializing', ghost: false });
        if (prior.restartOrdered) prior.reportedSinceRestart = true;
        return;
      }
      const m = newMachine(d.machineId, d.role, d.gpus);
      view.machines[d.machineId] = m;
      if (!takeOverSlot(view, m)) arrived(view, m, at);
      return;
    }
    case 'MachineRoleChanged': {
      const m = view.machines[event.data.machineId];
      if (m) m.role = event.data.to;
      return;
    }
    case 'MachineDeregistered': {
      const m = view.machines[event.data.machineId];
      if (!m) return;
      // A machine taken out by an outage keeps its slot (counted down) until its replacement works.
      if (m.heldBy && view.outages[m.heldBy]?.closedAt === null) m.ghost = true;
      else delete view.machines[m.machineId];
      return;
    }
    case 'RolePhaseChanged': {
      const m = view.machines[event.data.machineId];
      if (!m) return;
      m.phase = event.data.phase;
      if (!m.heldBy || !m.restartOrdered) return;
      m.reportedSinceRestart = true;
      if (event.data.phase !== 'initializing') release(view, m, at);
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
        planned: d.evidence.signal === 'node-draining',
        action: null,
        decisionRule: null,
        startedAt: at - d.detectionLatencyMs,
        confirmedAt: at,
        awaitingReplacement: [],
        taskRestart: false,
        closedAt: null,
      };
      view.outages[o.outageId] = o;
      // A departing trainer trains on until its group moves: the decision holds the group.
      if (o.planned && d.handledAs === 'trainer') return;
      // A trainer fault stops the whole trainer group (its ranks hang on the dead one); a rollout fault, its machine.
      const hit = d.handledAs === 'trainer' ? Object.values(view.machines).filter(isTrainer) : [view.machines[d.machineId]].filter(Boolean);
      if (!view.machines[d.machineId] && d.handledAs === 'rollout') return;
      for (const m of hit) {
        if (m.heldBy && view.outages[m.heldBy]?.closedAt === null) continue; // already down for another fault
        const effectiveSince = m.effectiveSince;
        hold(m, o);
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
        for (const m of Object.values(view.machines).filter(isTrainer)) if (!(m.heldBy && view.outages[m.heldBy]?.closedAt === null)) hold(m, o);
      }
      return;
    }
    case 'RestartTask': {
      const o = outageOf(view, event.data.recoveryId);
      if (!o) return;
      startTaskRestart(view, o);
      // The batch being generated is lost: its rollouts are re-executed after the restart.
      for (const m of Object.values(view.machines)) {
        for (const [from, to] of m.atRisk) reclassify(view, m, from, to, 'lost-rollout', o.outageId);
        m.atRisk = [];
        orderRestart(m, o);
      }
      return;
    }
    case 'RestartTrainerGroup': {
      const o = outageOf(view, event.data.recoveryId);
      if (!o) return;
      for (const id of event.data.machines) {
        const m = view.machines[id];
        if (!m) continue;
        if (!m.heldBy) hold(m, o);
        if (m.heldBy === o.outageId) orderRestart(m, o);
      }
      return;
    }
    case 'RestartRolloutEngine': {
      const o = outageOf(view, event.data.recoveryId);
      const m = view.machines[event.data.machineId];
      if (!o || !m || o.closedAt !== null) return;
      // The engine restarts in place on its machine: the new engine's first working phase ends the outage.
      if (!m.heldBy) hold(m, o);
      if (m.heldBy === o.outageId) orderRestart(m, o);
      return;
    }
    case 'PromoteRolloutToTrainer': {
      const o = outageOf(view, event.data.recoveryId);
      const m = view.machines[event.data.rolloutMachineId];
      if (!o || !m) return;
      // The standby stops serving rollouts and becomes a trainer rank of the restarting group.
      if (!m.heldBy) hold(m, o);
      orderRestart(m, o);
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
      if (m && !m.heldBy) hold(m, o);
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
      for (const m of Object.values(view.machines)) {
        m.atRisk = m.atRisk.filter(([, to]) => to > consumedBefore).map(([from, to]) => [Math.max(from, consumedBefore), to]);
      }
      view.steps += 1;
      return;
    }
  }
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
  };
}

function outageOf(view: EttrView, recoveryId: string): Outage | undefined {
  const id = view.recoveries[recoveryId];
  return id ? view.outages[id] : undefined;
}

function hold(m: MachineView, o: Outage): void {
  m.heldBy = o.outageId;
  m.restartOrdered = false;
  m.reportedSinceRestart = false;
  m.effectiveSince = null;
}

function orderRestart(m: MachineView, o: Outage): void {
  if (m.heldBy !== o.outageId) hold(m, o);
  m.restartOrdered = true;
  m.reportedSinceRestart = false;
}

function startTaskRestart(view: EttrView, o: Outage): void {
  o.taskRestart = true;
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
    hold(m, o);
    // Re-held machines keep no effective streak: nothing to reach back to.
  }
}

/** The task restart in progress, if any. */
function openTaskRestart(view: EttrView): Outage | undefined {
  return Object.values(view.outages).find((o) => o.closedAt === null && o.taskRestart);
}

/** A new machine of the role an outage waits a replacement for takes over the replaced machine's slot. */
function takeOverSlot(view: EttrView, m: MachineView): boolean {
  for (const o of Object.values(view.outages)) {
    if (o.closedAt !== null) continue;
    const i = o.awaitingReplacement.findIndex((r) => r.role === m.role || (r.role !== 'rollout' && m.role !== 'rollout'));
    if (i < 0) continue;
    const [replaced] = o.awaitingReplacement.splice(i, 1);
    const old = view.machines[replaced.machineId];
    if (old && old.heldBy !== null && old.machineId !== m.machineId) {
      // It may be down for an earlier outage still (a replacement lost before it ever worked): it leaves
      // that outage, which is over once it holds and awaits nothing.
      const holder = view.outages[old.heldBy];
      if (old.ghost) delete view.machines[old.machineId];
      else old.heldBy = null; // isolated but still registered: its own accounting resumes
      if (holder && holder !== o && holder.closedAt === null && holder.awaitingReplacement.length === 0) {
        if (!Object.values(view.machines).some((x) => x.heldBy === holder.outageId)) holder.closedAt = view.clock ?? 0;
      }
    }
    hold(m, o);
    // Its registration is the new process reporting in: it initialises from here.
    m.restartOrdered = true;
    m.reportedSinceRestart = true;
    m.phase = 'initializing';
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
  m.heldBy = null;
  m.restartOrdered = false;
  m.reportedSinceRestart = false;
  if (!o) return;
  const stillHeld = Object.values(view.machines).some((x) => x.heldBy === o.outageId);
  if (!stillHeld && o.awaitingReplacement.length === 0) o.closedAt = at;
}

function close(view: EttrView, o: Outage, at: number): void {
  o.closedAt = at;
  for (const m of Object.values(view.machines)) {
    if (m.heldBy !== o.outageId) continue;
    if (m.ghost) delete view.machines[m.machineId];
    else {
      m.heldBy = null;
      m.restartOrdered = false;
    }
  }
}

/** Accounts up to `now` (a copy: the view itself stays at its last event). */
export function viewAt(view: EttrView, now: number): EttrView {
  const copy: EttrView = structuredClone(view);
  if (copy.startedAt !== null && copy.clock !== null && now > copy.clock) advance(copy, now);
  return copy;
}
