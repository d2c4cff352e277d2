import { Decider } from '@robustrl/domain-kit';
import { Draft, draft, Evidence, MessageOf, Role } from '@robustrl/contracts';
import { PAPER_DETECTION_DEFAULTS, ResolvedDetectionSettings, resolveDetectionSettings } from './detection-settings';
import { DEFAULT_DETECTION_RULES, DetectionRule, Finding, MACHINE_OBSERVATIONS, MachineObservation, RuleContext, WatchedMachine } from './rules';

/**
 * The detector of one job (paper §4), as a decider: time is an input, rules are pluggable.
 *
 *  - `observe`: a message about the job arrived at `now` (telemetry, membership, heartbeats…);
 *    rules of the machine it concerns fold it in and are evaluated at once (explicit signals
 *    confirm immediately).
 *  - `tick`: time passed; every machine's rules are evaluated, open probes time out.
 *
 * Outputs are FaultSuspected / HeartbeatProbeRequested / FaultConfirmed / SuspicionCleared drafts;
 * the detector's own outputs are folded back in by `evolve` like any other event.
 */
export type DetectorInput = MachineObservation | MessageOf<'JobStarted'>;
export type DetectorOutput = MessageOf<'FaultSuspected' | 'HeartbeatProbeRequested' | 'FaultConfirmed' | 'SuspicionCleared'>;
export type DetectorEvent = DetectorInput | DetectorOutput;
export type DetectorCommand = { kind: 'observe'; message: DetectorInput; now: number } | { kind: 'tick'; now: number };

export const DETECTOR_INPUT_TYPES = ['JobStarted', ...MACHINE_OBSERVATIONS] as const;
export const DETECTOR_OUTPUT_TYPES = ['FaultSuspected', 'HeartbeatProbeRequested', 'FaultConfirmed', 'SuspicionCleared'] as const;

interface OpenSuspicion {
  verdictId: string;
  machineId: string;
  rule: string;
  since: number;
  evidence: Evidence;
  /** Set while a heartbeat probe is outstanding. */
  probe: { probeId: string; sentAt: number; timeoutMs: number } | null;
}

export interface DetectorState {
  settings: ResolvedDetectionSettings;
  machines: Record<string, WatchedMachine>;
  /** Per machine, per rule name: the rule's private state. */
  ruleStates: Record<string, Record<string, unknown>>;
  /** Keyed by `${machineId}|${rule}`. */
  suspicions: Record<string, OpenSuspicion>;
  confirmedAt: Record<string, number>;
  verdictSeq: number;
}

const suspicionKey = (machineId: string, rule: string) => `${machineId}|${rule}`;
const timeOf = (iso: string) => Date.parse(iso);
const handledAs = (role: Role): 'trainer' | 'rollout' => (role === 'rollout' ? 'rollout' : 'trainer');

export function createDetectorDecider(options: {
  rules?: readonly DetectionRule[];
  defaults?: ResolvedDetectionSettings;
} = {}): Decider<DetectorState, DetectorCommand, DetectorEvent, Draft> {
  const rules = options.rules ?? DEFAULT_DETECTION_RULES;
  const defaults = options.defaults ?? PAPER_DETECTION_DEFAULTS;

  const rulesFor = (m: WatchedMachine) => rules.filter((r) => r.appliesTo(m.role));
  const freshRuleStates = (m: WatchedMachine, at: number) =>
    Object.fromEntries(rulesFor(m).map((r) => [r.name, r.initialState(at)]));
  const contextFor = (state: DetectorState, machine: WatchedMachine, now: number): RuleContext => ({
    now,
    machine,
    peers: Object.values(state.machines).filter((p) => p.machineId !== machine.machineId),
    settings: state.settings,
  });

  /**
   * A trainer-idle verdict on one rank shortly after another rank's trainer verdict is its echo: the
   * ranks hang on their dead peer and cross the window together. Only a recent verdict suppresses, so
   * a machine that was never re-armed (e.g. isolated without a deregistration) cannot mute the group.
   */
  function trainerGroupAlreadyConfirmed(state: DetectorState, machine: WatchedMachine, now: number): boolean {
    return Object.values(state.machines).some(
      (m) =>
        m.machineId !== machine.machineId &&
        m.status === 'confirmed' &&
        handledAs(m.role) === 'trainer' &&
        now - (state.confirmedAt[m.machineId] ?? -Infinity) < state.settings.trainerIdleWindowMs,
    );
  }

  function evaluateMachine(state: DetectorState, machine: WatchedMachine, now: number, nextSeq: () => number): Draft[] {
    if (machine.status !== 'watching') return [];
    const out: Draft[] = [];
    const ctx = contextFor(state, machine, now);
    for (const rule of rulesFor(machine)) {
      const key = suspicionKey(machine.machineId, rule.name);
      const open = state.suspicions[key];
      const finding: Finding | null = rule.evaluate(state.ruleStates[machine.machineId]?.[rule.name], ctx);
      if (finding === null) {
        // Evidence gone (e.g. output resumed while the probe was out): the suspicion ends here.
        if (open) {
          out.push(draft('SuspicionCleared', { verdictId: open.verdictId, machineId: machine.machineId, role: machine.role, rule: rule.name, evidence: open.evidence, reason: 'the evidence no longer holds' }));
        }
        continue;
      }
      if (finding.verdict === 'confirm') {
        if (rule.name === 'trainer-idle' && trainerGroupAlreadyConfirmed(state, machine, now)) continue;
        out.push(confirmed(machine, rule.name, open?.verdictId ?? verdictIdFor(machine, rule.name, nextSeq()), finding.since, finding.evidence, finding.machineFaulty, now));
        return out; // one confirmed fault per machine: the rest is the controller's business
      }
      if (open) continue;
      const verdictId = verdictIdFor(machine, rule.name, nextSeq());
      out.push(draft('FaultSuspected', { verdictId, machineId: machine.machineId, role: machine.role, rule: rule.name, evidence: finding.evidence }));
      if (finding.verdict === 'probe') {
        out.push(draft('HeartbeatProbeRequested', { probeId: `${verdictId}/probe`, machineId: machine.machineId, timeoutMs: state.settings.probeTimeoutMs }));
      }
    }
    return out;
  }

  function expiredProbes(state: DetectorState, now: number): Draft[] {
    const out: Draft[] = [];
    for (const s of Object.values(state.suspicions)) {
      const machine = state.machines[s.machineId];
      if (!s.probe || !machine || machine.status !== 'watching' || now < s.probe.sentAt + s.probe.timeoutMs) continue;
      const evidence: Evidence = { ...s.evidence, probe: { probeId: s.probe.probeId, result: 'timed-out' } };
      // An agent that cannot answer means the machine (or its network) is gone, not only the process.
      out.push(confirmed(machine, s.rule, s.verdictId, s.since, evidence, true, now));
    }
    return out;
  }

  function decide(command: DetectorCommand, state: DetectorState): Draft[] {
    let seq = state.verdictSeq;
    const nextSeq = () => ++seq;
    if (command.kind === 'tick') {
      const out = expiredProbes(state, command.now);
      const alreadyConfirmed = new Set(out.map((d) => (d.type === 'FaultConfirmed' ? d.data.machineId : '')));
      let view = state;
      for (const machine of Object.values(state.machines)) {
        if (alreadyConfirmed.has(machine.machineId)) continue;
        const drafts = evaluateMachine(view, machine, command.now, nextSeq);
        out.push(...drafts);
        // A trainer confirmed in this tick must suppress its group's echoes within the same tick.
        for (const d of drafts) if (d.type === 'FaultConfirmed') view = markConfirmed(view, d.data.machineId, command.now);
      }
      return out;
    }
    const { message, now } = command;
    if (message.type === 'HeartbeatAcked') {
      const open = Object.values(state.suspicions).find((s) => s.probe?.probeId === message.data.probeId);
      if (!open || state.machines[open.machineId]?.status !== 'watching') return [];
      const latencyMs = Math.max(0, timeOf(message.data.ackedAt) - open.probe!.sentAt);
      const machine = state.machines[open.machineId];
      return [
        draft('SuspicionCleared', {
          verdictId: open.verdictId,
          machineId: open.machineId,
          role: machine.role,
          rule: open.rule,
          evidence: { ...open.evidence, probe: { probeId: open.probe!.probeId, result: 'acked', latencyMs } },
          reason: `the agent answered the heartbeat probe in ${latencyMs} ms`,
        }),
      ];
    }
    if (message.type === 'JobStarted' || !('machineId' in message.data)) return [];
    const after = evolve(state, message);
    const machine = after.machines[message.data.machineId];
    return machine ? evaluateMachine(after, machine, now, nextSeq) : [];
  }

  function confirmed(machine: WatchedMachine, rule: string, verdictId: string, since: number, evidence: Evidence, machineFaulty: boolean, now: number): Draft {
    return draft('FaultConfirmed', {
      verdictId,
      machineId: machine.machineId,
      role: machine.role,
      rule,
      evidence,
      handledAs: handledAs(machine.role),
      machineFaulty,
      detectionLatencyMs: Math.max(0, Math.round(now - since)),
    });
  }

  function verdictIdFor(machine: WatchedMachine, rule: string, seq: number): string {
    return `${machine.machineId}/${rule}/${seq}`;
  }

  function markConfirmed(state: DetectorState, machineId: string, at: number): DetectorState {
    const m = state.machines[machineId];
    if (!m) return state;
    const suspicions = Object.fromEntries(Object.entries(state.suspicions).filter(([, s]) => s.machineId !== machineId));
    return { ...state, machines: { ...state.machines, [machineId]: { ...m, status: 'confirmed' } }, suspicions, confirmedAt: { ...state.confirmedAt, [machineId]: at } };
  }

  /** A confirmed machine is watched again once it shows life after the verdict (re-registered, or its restarted role reports a phase). */
  function rearm(state: DetectorState, m: WatchedMachine, at: number): WatchedMachine {
    if (m.status !== 'confirmed' || at <= (state.confirmedAt[m.machineId] ?? Infinity)) return m;
    return { ...m, status: 'watching', lastActivityAt: null, lastThroughput: null };
  }

  function evolve(state: DetectorState, event: DetectorEvent): DetectorState {
    const at = timeOf(event.occurredAt);
    switch (event.type) {
      case 'JobStarted':
        return { ...state, settings: resolveDetectionSettings(event.data.detection, defaults) };
      case 'FaultSuspected':
        return {
          ...state,
          verdictSeq: Math.max(state.verdictSeq, seqOf(event.data.verdictId)),
          suspicions: {
            ...state.suspicions,
            [suspicionKey(event.data.machineId, event.data.rule)]: { verdictId: event.data.verdictId, machineId: event.data.machineId, rule: event.data.rule, since: event.data.evidence.faultEvidenceSince ? timeOf(event.data.evidence.faultEvidenceSince) : at, evidence: event.data.evidence, probe: null },
          },
        };
      case 'HeartbeatProbeRequested': {
        const entry = Object.entries(state.suspicions).find(([, s]) => event.data.probeId === `${s.verdictId}/probe`);
        if (!entry) return state;
        const [key, s] = entry;
        return { ...state, suspicions: { ...state.suspicions, [key]: { ...s, probe: { probeId: event.data.probeId, sentAt: at, timeoutMs: event.data.timeoutMs } } } };
      }
      case 'SuspicionCleared': {
        const suspicions = { ...state.suspicions };
        delete suspicions[suspicionKey(event.data.machineId, event.data.rule)];
        return { ...state, suspicions };
      }
      case 'FaultConfirmed':
        return { ...markConfirmed(state, event.data.machineId, at), verdictSeq: Math.max(state.verdictSeq, seqOf(event.data.verdictId)) };
      default:
        return observeMachine(state, event, at);
    }
  }

  function observeMachine(state: DetectorState, message: MachineObservation, at: number): DetectorState {
    const id = message.data.machineId;
    if (message.type === 'MachineRegistered') {
      const d = message.data;
      const prior = state.machines[id];
      // Topics are ordered per job, not across topics: a registration may arrive after telemetry
      // that was sent later. One older than the machine's last verdict only fills in the details.
      if (prior && prior.status === 'confirmed' && at <= (state.confirmedAt[id] ?? -Infinity)) {
        return { ...state, machines: { ...state.machines, [id]: { ...prior, role: d.role, zone: d.zone, hardwareClass: d.hardwareClass } } };
      }
      const machine: WatchedMachine = {
        machineId: id, role: d.role, zone: d.zone, hardwareClass: d.hardwareClass, status: 'watching',
        phase: null, phaseSince: at, lastActivityAt: null, lastThroughput: null,
      };
      // A (re-)registration starts from a clean slate: new process, new evidence.
      const suspicions = prior ? withoutMachine(state.suspicions, id) : state.suspicions;
      return { ...state, suspicions, machines: { ...state.machines, [id]: machine }, ruleStates: { ...state.ruleStates, [id]: freshRuleStates(machine, at) } };
    }
    if (!state.machines[id] && (message.type === 'AgentFaultSignalled' || message.type === 'RolePhaseChanged')) {
      // The machine's registration has not arrived yet (another topic); the message names its role.
      const machine: WatchedMachine = {
        machineId: id, role: message.data.role, zone: 'unknown', hardwareClass: 'unknown', status: 'watching',
        phase: null, phaseSince: at, lastActivityAt: null, lastThroughput: null,
      };
      state = { ...state, machines: { ...state.machines, [id]: machine }, ruleStates: { ...state.ruleStates, [id]: freshRuleStates(machine, at) } };
    }
    const prior = state.machines[id];
    if (!prior) return state; // telemetry of a machine we never saw register: nothing to judge it against
    if (message.type === 'MachineDeregistered') {
      return { ...state, suspicions: withoutMachine(state.suspicions, id), machines: { ...state.machines, [id]: { ...prior, status: 'gone' } } };
    }
    if (message.type === 'MachineRoleChanged') {
      const machine: WatchedMachine = { ...prior, role: message.data.to, status: 'watching', phase: null, phaseSince: at, lastActivityAt: null, lastThroughput: null };
      return { ...state, suspicions: withoutMachine(state.suspicions, id), machines: { ...state.machines, [id]: machine }, ruleStates: { ...state.ruleStates, [id]: freshRuleStates(machine, at) } };
    }
    let machine = prior;
    let ruleStates = state.ruleStates[id] ?? {};
    if (message.type === 'RolePhaseChanged' && prior.status === 'confirmed') {
      machine = rearm(state, prior, at);
      if (machine.status === 'watching') ruleStates = freshRuleStates(machine, at);
    }
    // Rules see the machine as it was before this message (e.g. the phase being left).
    const ctx = contextFor(state, machine, at);
    const nextRuleStates: Record<string, unknown> = {};
    for (const rule of rulesFor(machine)) nextRuleStates[rule.name] = rule.observe(ruleStates[rule.name] ?? rule.initialState(at), message, at, ctx);
    switch (message.type) {
      case 'RolePhaseChanged':
        machine = { ...machine, phase: message.data.phase, phaseSince: at };
        break;
      case 'GpuActivitySampled':
        if (message.data.tensorActive > 0) machine = { ...machine, lastActivityAt: at };
        break;
      case 'RolloutThroughputSampled': {
        const d = message.data;
        machine = { ...machine, lastThroughput: { at, tokensPerSecond: d.tokensPerSecond, completedRequests: d.completedRequests, inFlightRequests: d.inFlightRequests, awaitingTools: d.awaitingTools } };
        break;
      }
      default:
        break;
    }
    const confirmedAt = machine.status === 'watching' && prior.status === 'confirmed' ? withoutKey(state.confirmedAt, id) : state.confirmedAt;
    return { ...state, confirmedAt, machines: { ...state.machines, [id]: machine }, ruleStates: { ...state.ruleStates, [id]: nextRuleStates } };
  }

  return {
    initialState: () => ({ settings: defaults, machines: {}, ruleStates: {}, suspicions: {}, confirmedAt: {}, verdictSeq: 0 }),
    decide,
    evolve,
  };
}

function seqOf(verdictId: string): number {
  const n = Number(verdictId.slice(verdictId.lastIndexOf('/') + 1));
  return Number.isFinite(n) ? n : 0;
}

function withoutMachine<T extends { machineId: string }>(record: Record<string, T>, machineId: string): Record<string, T> {
  return Object.fromEntries(Object.entries(record).filter(([, v]) => v.machineId !== machineId));
}

function withoutKey<T>(record: Record<string, T>, key: string): Record<string, T> {
  const copy = { ...record };
  delete copy[key];
  return copy;
}

/** The detector with the paper's rules and defaults. */
export const DetectorDecider = createDetectorDecider();
