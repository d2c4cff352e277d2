import { assertNever } from '@robustrl/domain-kit';
import { restartsTask } from '@robustrl/contracts';
import { resolveDetectionSettings } from './detection-settings';
import { reindexAll, reindexMachine } from './detector-reindex';
import { DetectorConfig, DetectorEvent, DetectorState, freshRuleStates, contextFor, rulesFor, seqOf, suspicionKey } from './detector.state';
import { AgentSilentRule, BlindInterval, MachineObservation, WatchedMachine } from './rules';
import type { AgentSilentState } from './rules/agent-silent.rule';
import { combineShares } from './throughput-shares';

/**
 * Folds one event into the detector state at `at` — the event's own time — updating `state` in place
 * and returning it (the decider is `in-place`: its host owns the state). The detector's outputs are
 * folded back like any other event (a verdict marks its machine, a probe request arms its timeout).
 *
 * Work per event is in proportion to what it changes: a message about a machine touches that machine's
 * entry, its rule states, its suspicions (one per rule at most) and its place in the index; only the
 * job-wide events (JobStarted's settings, the end of a blind interval) revisit every machine.
 */
export function evolveDetector(config: DetectorConfig, state: DetectorState, event: DetectorEvent, at: number): DetectorState {
  if (at > state.foldedUntil) state.foldedUntil = at;
  switch (event.type) {
    case 'JobStarted':
      state.settings = resolveDetectionSettings(event.data.detection, config.defaults);
      // A resumed task (a task restart, or the job started again from a checkpoint): every role starts over.
      if (restartsTask(event.data) && Object.keys(state.machines).length > 0) return restartedTask(config, state, at);
      reindexAll(config, state, state.foldedUntil);
      return state;
    case 'FaultSuspected': {
      const d = event.data;
      state.verdictSeq = Math.max(state.verdictSeq, seqOf(d.verdictId));
      state.suspicions[suspicionKey(d.machineId, d.rule)] = {
        verdictId: d.verdictId,
        machineId: d.machineId,
        rule: d.rule,
        since: d.evidence.faultEvidenceSince ? Date.parse(d.evidence.faultEvidenceSince) : at,
        evidence: d.evidence,
        probe: null,
      };
      reindexMachine(config, state, d.machineId, state.foldedUntil);
      return state;
    }
    case 'HeartbeatProbeRequested': {
      const { machineId, probeId, timeoutMs } = event.data;
      for (const rule of config.rules) {
        const key = suspicionKey(machineId, rule.name);
        const s = state.suspicions[key];
        if (s && probeId === `${s.verdictId}/probe`) {
          state.suspicions[key] = { ...s, probe: { probeId, sentAt: at, timeoutMs } };
          reindexMachine(config, state, machineId, state.foldedUntil);
          break;
        }
      }
      return state;
    }
    case 'SuspicionCleared':
      delete state.suspicions[suspicionKey(event.data.machineId, event.data.rule)];
      reindexMachine(config, state, event.data.machineId, state.foldedUntil);
      return state;
    case 'FaultConfirmed':
      markConfirmed(config, state, event.data.machineId, at);
      state.verdictSeq = Math.max(state.verdictSeq, seqOf(event.data.verdictId));
      return state;
    case 'DetectionPaused': {
      const since = Date.parse(event.data.blindSince);
      // Paused twice (a second reason while still blind) stays blind since the first.
      if (!(state.blind && state.blind.since <= since)) state.blind = { since, reason: event.data.reason };
      return state;
    }
    case 'DetectionResumed': {
      // A pause recorded earlier (e.g. by an incarnation that crashed while blind) may reach further back.
      const from = Math.min(Date.parse(event.data.blindSince), state.blind?.since ?? Infinity);
      return resumeAfterBlindness(config, state, { from, to: Date.parse(event.data.resumedAt) });
    }
    case 'MachineRegistered':
    case 'MachineRoleChanged':
    case 'MachineDeregistered':
    case 'GpuActivitySampled':
    case 'RolePhaseChanged':
    case 'RolloutThroughputSampled':
    case 'RolloutRequestsObserved':
    case 'HeartbeatAcked':
    case 'AgentFaultSignalled':
      observeMachine(config, state, event, at);
      reindexMachine(config, state, event.data.machineId, state.foldedUntil);
      return state;
    default:
      return assertNever(event, 'detector event');
  }
}

/**
 * The gap closed: every window discounts the blind interval (paused, not reset), and no window may
 * suspect anyone during the grace period — the agents' first samples after the gap may still be on
 * their way (producers reconnecting after a broker outage).
 * Open suspicions were withdrawn by the decision on DetectionResumed; they start over from fresh evidence.
 */
function resumeAfterBlindness(config: DetectorConfig, state: DetectorState, blind: BlindInterval): DetectorState {
  for (const [machineId, byRule] of Object.entries(state.ruleStates)) {
    const machine = state.machines[machineId];
    if (!machine) continue;
    for (const rule of rulesFor(config, machine)) if (rule.name in byRule) byRule[rule.name] = rule.discountBlindness(byRule[rule.name], blind);
  }
  // A short gap (a quick restart) needs only a short grace: no longer than the gap, at most the setting.
  const graceMs = Math.min(state.settings.resumeGraceMs, blind.to - blind.from);
  state.blind = null;
  state.graceUntil = blind.to + graceMs;
  reindexAll(config, state, state.foldedUntil);
  return state;
}

/**
 * Every machine of the task restarts: each is judged again once it registers again (a new process, a
 * clean slate), not from the silence of its restart — on a loaded host a whole job's agents take tens
 * of seconds to come up, longer than a window. A machine that does not come back is the orchestrator's
 * to report: its restartTask waits for the machines to run.
 */
function restartedTask(config: DetectorConfig, state: DetectorState, at: number): DetectorState {
  for (const [id, m] of Object.entries(state.machines)) {
    if (m.status === 'gone') continue;
    // Its open suspicions are withdrawn by the decision on this JobStarted (SuspicionCleared).
    state.machines[id] = { ...m, status: 'restarting', watchedSince: at };
  }
  reindexAll(config, state, state.foldedUntil);
  return state;
}

/** A verdict stands on its machine: no more suspicions of it, and it is not judged again until re-armed. */
function markConfirmed(config: DetectorConfig, state: DetectorState, machineId: string, at: number): void {
  const m = state.machines[machineId];
  if (!m) return;
  dropSuspicionsOf(config, state, machineId);
  state.machines[machineId] = { ...m, status: 'confirmed' };
  state.confirmedAt[machineId] = at;
  reindexMachine(config, state, machineId, state.foldedUntil);
}

const unknownMachine = (machineId: string, role: WatchedMachine['role'], at: number): WatchedMachine => ({
  machineId,
  role,
  zone: 'unknown',
  hardwareClass: 'unknown',
  status: 'watching',
  phase: null,
  phaseSince: at,
  watchedSince: at,
  lastActivityAt: null,
  lastThroughput: null,
});

/**
 * One message about one machine, folded into its entry and its rules' states.
 *
 * Samples (GpuActivitySampled, RolloutThroughputSampled) are inputs to windows, not facts, and their
 * folding does not depend on the order they arrive in relative to the facts around them: after a
 * restart the host folds the snapshot (facts included) and then reads samples again from the bus, so a
 * sample may be folded after a registration, role change or verdict that followed it. Hence:
 *  - windows keep the newest time (`lastActivityAt`, `lastThroughput`, a rule's anchors: max, never back);
 *  - a sample older than the machine's `watchedSince` (its registration, role change or re-arm) belongs
 *    to its previous incarnation and is not folded — folded first, the fact would have reset it anyway;
 *  - rules do the same with their own anchors (see trainer-idle, straggler).
 * So a sample folded late never makes a machine look older or more silent than it did in order.
 */
function observeMachine(config: DetectorConfig, state: DetectorState, message: MachineObservation, at: number): void {
  const id = message.data.machineId;
  if (message.type === 'MachineRegistered') {
    const d = message.data;
    const prior = state.machines[id];
    // Topics are ordered per job, not across topics: a registration may arrive after telemetry
    // that was sent later. One older than the machine's last verdict only fills in the details.
    // One from before its task restarted (read late) is of the incarnation that restart ended.
    const stale =
      prior && ((prior.status === 'confirmed' && at <= (state.confirmedAt[id] ?? -Infinity)) || (prior.status === 'restarting' && at < prior.watchedSince));
    if (prior && stale) {
      state.machines[id] = { ...prior, role: d.role, zone: d.zone, hardwareClass: d.hardwareClass };
      return;
    }
    const machine: WatchedMachine = { ...unknownMachine(id, d.role, at), zone: d.zone, hardwareClass: d.hardwareClass };
    // A (re-)registration starts from a clean slate: new process, new evidence.
    if (prior) dropSuspicionsOf(config, state, id);
    state.machines[id] = machine;
    state.ruleStates[id] = freshRuleStates(config, machine, at);
    return;
  }
  if (!state.machines[id] && (message.type === 'AgentFaultSignalled' || message.type === 'RolePhaseChanged')) {
    // The machine's registration has not arrived yet (another topic); the message names its role.
    const machine = unknownMachine(id, message.data.role, at);
    state.machines[id] = machine;
    state.ruleStates[id] = freshRuleStates(config, machine, at);
  }
  const prior = state.machines[id];
  if (!prior) return; // telemetry of a machine we never saw register: nothing to judge it against
  if (message.type === 'MachineDeregistered') {
    dropSuspicionsOf(config, state, id);
    state.machines[id] = { ...prior, status: 'gone' };
    return;
  }
  if (message.type === 'MachineRoleChanged') {
    dropSuspicionsOf(config, state, id);
    const machine: WatchedMachine = {
      ...prior,
      role: message.data.to,
      status: 'watching',
      phase: null,
      phaseSince: at,
      watchedSince: at,
      lastActivityAt: null,
      lastThroughput: null,
      throughputShares: undefined,
    };
    state.machines[id] = machine;
    const heard = state.ruleStates[id]?.[AgentSilentRule.name] as AgentSilentState | undefined;
    state.ruleStates[id] = freshRuleStates(config, machine, at);
    // The machine's own agent announced the change and goes on reporting: its heartbeat window goes on
    // armed, so a standby lost right after its promotion is found by its silence, not left to the
    // command timeout (a fresh window arms only at the next sample, which a dead agent never sends).
    // Only a machine being watched with a heartbeat heard: a gone machine's late announcement arms nothing.
    if (prior.status === 'watching' && heard?.heardAt != null && AgentSilentRule.name in state.ruleStates[id])
      state.ruleStates[id][AgentSilentRule.name] = { heardAt: Math.max(heard.heardAt, at) };
    return;
  }
  const isSample = message.type === 'GpuActivitySampled' || message.type === 'RolloutThroughputSampled' || message.type === 'RolloutRequestsObserved';
  if (isSample && at < prior.watchedSince) return; // the machine's previous incarnation (see above)
  let machine = prior;
  let ruleStates = state.ruleStates[id];
  if (!ruleStates) ruleStates = state.ruleStates[id] = {};
  if (message.type === 'RolePhaseChanged' && prior.status === 'confirmed') {
    machine = rearm(state, prior, at);
    if (machine.status === 'watching') ruleStates = state.ruleStates[id] = freshRuleStates(config, machine, at);
  }
  // Several routers may each sample a share of a rollout's requests: rules see the rollout's whole.
  let observed: MachineObservation = message;
  if (message.type === 'RolloutThroughputSampled') {
    const { shares, combined } = combineShares(machine.throughputShares, message.source, at, message.data);
    machine.throughputShares = shares;
    if (combined !== message.data) observed = { ...message, data: combined };
  }
  // Rules see the machine as it was before this message (e.g. the phase being left).
  const ctx = contextFor(state, machine, at);
  for (const rule of rulesFor(config, machine)) ruleStates[rule.name] = rule.observe(ruleStates[rule.name] ?? rule.initialState(at), observed, at, ctx);
  switch (message.type) {
    case 'RolePhaseChanged':
      machine = { ...machine, phase: message.data.phase, phaseSince: at };
      break;
    // Samples, tens of thousands a step at 10,000 GPUs, update the machine's entry in place (the
    // state is the host's: the decider evolves in place) rather than copy it per sample.
    case 'GpuActivitySampled':
      if (message.data.tensorActive > 0 && (machine.lastActivityAt === null || at > machine.lastActivityAt)) machine.lastActivityAt = at;
      break;
    case 'RolloutThroughputSampled': {
      const d = (observed as typeof message).data;
      if (machine.lastThroughput !== null && at < machine.lastThroughput.at) break;
      machine.lastThroughput = {
        at,
        tokensPerSecond: d.tokensPerSecond,
        completedRequests: d.completedRequests,
        inFlightRequests: d.inFlightRequests,
        awaitingTools: d.awaitingTools,
      };
      break;
    }
    default:
      break;
  }
  if (machine.status === 'watching' && prior.status === 'confirmed') delete state.confirmedAt[id];
  if (machine !== prior) state.machines[id] = machine;
}

/** A confirmed machine is watched again once it shows life after the verdict (re-registered, or its restarted role reports a phase). */
function rearm(state: DetectorState, m: WatchedMachine, at: number): WatchedMachine {
  if (m.status !== 'confirmed' || at <= (state.confirmedAt[m.machineId] ?? Infinity)) return m;
  return { ...m, status: 'watching', watchedSince: at, lastActivityAt: null, lastThroughput: null, throughputShares: undefined };
}

function dropSuspicionsOf(config: DetectorConfig, state: DetectorState, machineId: string): void {
  for (const rule of config.rules) delete state.suspicions[suspicionKey(machineId, rule.name)];
}
