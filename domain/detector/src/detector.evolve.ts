import { assertNever } from '@robustrl/domain-kit';
import { resolveDetectionSettings } from './detection-settings';
import { DetectorConfig, DetectorEvent, DetectorState, freshRuleStates, contextFor, rulesFor, seqOf, suspicionKey } from './detector.state';
import { BlindInterval, MachineObservation, WatchedMachine } from './rules';

/**
 * Folds one event into the detector state at `at` — the event's own time. The detector's outputs are
 * folded back like any other event (a verdict marks its machine, a probe request arms its timeout).
 */
export function evolveDetector(config: DetectorConfig, state: DetectorState, event: DetectorEvent, at: number): DetectorState {
  switch (event.type) {
    case 'JobStarted':
      return { ...state, settings: resolveDetectionSettings(event.data.detection, config.defaults) };
    case 'FaultSuspected':
      return {
        ...state,
        verdictSeq: Math.max(state.verdictSeq, seqOf(event.data.verdictId)),
        suspicions: {
          ...state.suspicions,
          [suspicionKey(event.data.machineId, event.data.rule)]: {
            verdictId: event.data.verdictId,
            machineId: event.data.machineId,
            rule: event.data.rule,
            since: event.data.evidence.faultEvidenceSince ? Date.parse(event.data.evidence.faultEvidenceSince) : at,
            evidence: event.data.evidence,
            probe: null,
          },
        },
      };
    case 'HeartbeatProbeRequested': {
      const entry = Object.entries(state.suspicions).find(([, s]) => event.data.probeId === `${s.verdictId}/probe`);
      if (!entry) return state;
      const [key, s] = entry;
      return {
        ...state,
        suspicions: { ...state.suspicions, [key]: { ...s, probe: { probeId: event.data.probeId, sentAt: at, timeoutMs: event.data.timeoutMs } } },
      };
    }
    case 'SuspicionCleared': {
      const suspicions = { ...state.suspicions };
      delete suspicions[suspicionKey(event.data.machineId, event.data.rule)];
      return { ...state, suspicions };
    }
    case 'FaultConfirmed':
      return { ...markConfirmed(state, event.data.machineId, at), verdictSeq: Math.max(state.verdictSeq, seqOf(event.data.verdictId)) };
    case 'DetectionPaused': {
      const since = Date.parse(event.data.blindSince);
      // Paused twice (a second reason while still blind) stays blind since the first.
      return { ...state, blind: state.blind && state.blind.since <= since ? state.blind : { since, reason: event.data.reason } };
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
    case 'HeartbeatAcked':
    case 'AgentFaultSignalled':
      return observeMachine(config, state, event, at);
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
  const ruleStates: DetectorState['ruleStates'] = {};
  for (const [machineId, byRule] of Object.entries(state.ruleStates)) {
    const machine = state.machines[machineId];
    const rules = machine ? rulesFor(config, machine) : [];
    ruleStates[machineId] = Object.fromEntries(
      Object.entries(byRule).map(([name, ruleState]) => {
        const rule = rules.find((r) => r.name === name);
        return [name, rule ? rule.discountBlindness(ruleState, blind) : ruleState];
      }),
    );
  }
  // A short gap (a quick restart) needs only a short grace: no longer than the gap, at most the setting.
  const graceMs = Math.min(state.settings.resumeGraceMs, blind.to - blind.from);
  return { ...state, ruleStates, blind: null, graceUntil: blind.to + graceMs };
}

/** A verdict stands on its machine: no more suspicions of it, and it is not judged again until re-armed. */
export function markConfirmed(state: DetectorState, machineId: string, at: number): DetectorState {
  const m = state.machines[machineId];
  if (!m) return state;
  const suspicions = Object.fromEntries(Object.entries(state.suspicions).filter(([, s]) => s.machineId !== machineId));
  return {
    ...state,
    machines: { ...state.machines, [machineId]: { ...m, status: 'confirmed' } },
    suspicions,
    confirmedAt: { ...state.confirmedAt, [machineId]: at },
  };
}

/** A confirmed machine is watched again once it shows life after the verdict (re-registered, or its restarted role reports a phase). */
function rearm(state: DetectorState, m: WatchedMachine, at: number): WatchedMachine {
  if (m.status !== 'confirmed' || at <= (state.confirmedAt[m.machineId] ?? Infinity)) return m;
  return { ...m, status: 'watching', lastActivityAt: null, lastThroughput: null };
}

const unknownMachine = (machineId: string, role: WatchedMachine['role'], at: number): WatchedMachine => ({
  machineId,
  role,
  zone: 'unknown',
  hardwareClass: 'unknown',
  status: 'watching',
  phase: null,
  phaseSince: at,
  lastActivityAt: null,
  lastThroughput: null,
});

function observeMachine(config: DetectorConfig, state: DetectorState, message: MachineObservation, at: number): DetectorState {
  const id = message.data.machineId;
  if (message.type === 'MachineRegistered') {
    const d = message.data;
    const prior = state.machines[id];
    // Topics are ordered per job, not across topics: a registration may arrive after telemetry
    // that was sent later. One older than the machine's last verdict only fills in the details.
    if (prior && prior.status === 'confirmed' && at <= (state.confirmedAt[id] ?? -Infinity)) {
      return { ...state, machines: { ...state.machines, [id]: { ...prior, role: d.role, zone: d.zone, hardwareClass: d.hardwareClass } } };
    }
    const machine: WatchedMachine = { ...unknownMachine(id, d.role, at), zone: d.zone, hardwareClass: d.hardwareClass };
    // A (re-)registration starts from a clean slate: new process, new evidence.
    const suspicions = prior ? withoutMachine(state.suspicions, id) : state.suspicions;
    return {
      ...state,
      suspicions,
      machines: { ...state.machines, [id]: machine },
      ruleStates: { ...state.ruleStates, [id]: freshRuleStates(config, machine, at) },
    };
  }
  if (!state.machines[id] && (message.type === 'AgentFaultSignalled' || message.type === 'RolePhaseChanged')) {
    // The machine's registration has not arrived yet (another topic); the message names its role.
    const machine = unknownMachine(id, message.data.role, at);
    state = { ...state, machines: { ...state.machines, [id]: machine }, ruleStates: { ...state.ruleStates, [id]: freshRuleStates(config, machine, at) } };
  }
  const prior = state.machines[id];
  if (!prior) return state; // telemetry of a machine we never saw register: nothing to judge it against
  if (message.type === 'MachineDeregistered') {
    return { ...state, suspicions: withoutMachine(state.suspicions, id), machines: { ...state.machines, [id]: { ...prior, status: 'gone' } } };
  }
  if (message.type === 'MachineRoleChanged') {
    const machine: WatchedMachine = {
      ...prior,
      role: message.data.to,
      status: 'watching',
      phase: null,
      phaseSince: at,
      lastActivityAt: null,
      lastThroughput: null,
    };
    return {
      ...state,
      suspicions: withoutMachine(state.suspicions, id),
      machines: { ...state.machines, [id]: machine },
      ruleStates: { ...state.ruleStates, [id]: freshRuleStates(config, machine, at) },
    };
  }
  let machine = prior;
  let ruleStates = state.ruleStates[id] ?? {};
  if (message.type === 'RolePhaseChanged' && prior.status === 'confirmed') {
    machine = rearm(state, prior, at);
    if (machine.status === 'watching') ruleStates = freshRuleStates(config, machine, at);
  }
  // Rules see the machine as it was before this message (e.g. the phase being left).
  const ctx = contextFor(state, machine, at);
  const nextRuleStates: Record<string, unknown> = {};
  for (const rule of rulesFor(config, machine)) nextRuleStates[rule.name] = rule.observe(ruleStates[rule.name] ?? rule.initialState(at), message, at, ctx);
  switch (message.type) {
    case 'RolePhaseChanged':
      machine = { ...machine, phase: message.data.phase, phaseSince: at };
      break;
    case 'GpuActivitySampled':
      if (message.data.tensorActive > 0) machine = { ...machine, lastActivityAt: at };
      break;
    case 'RolloutThroughputSampled': {
      const d = message.data;
      machine = {
        ...machine,
        lastThroughput: {
          at,
          tokensPerSecond: d.tokensPerSecond,
          completedRequests: d.completedRequests,
          inFlightRequests: d.inFlightRequests,
          awaitingTools: d.awaitingTools,
        },
      };
      break;
    }
    default:
      break;
  }
  const confirmedAt = machine.status === 'watching' && prior.status === 'confirmed' ? withoutKey(state.confirmedAt, id) : state.confirmedAt;
  return { ...state, confirmedAt, machines: { ...state.machines, [id]: machine }, ruleStates: { ...state.ruleStates, [id]: nextRuleStates } };
}

function withoutMachine<T extends { machineId: string }>(record: Record<string, T>, machineId: string): Record<string, T> {
  return Object.fromEntries(Object.entries(record).filter(([, v]) => v.machineId !== machineId));
}

function withoutKey<T>(record: Record<string, T>, key: string): Record<string, T> {
  const copy = { ...record };
  delete copy[key];
  return copy;
}
