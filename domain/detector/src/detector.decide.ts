import { draft, Evidence, MessageOf } from '@robustrl/contracts';
import { assertNever } from '@robustrl/domain-kit';
import { evolveDetector, markConfirmed } from './detector.evolve';
import {
  contextFor,
  DetectorCommand,
  DetectorConfig,
  DetectorDraft,
  DetectorState,
  handledAs,
  rulesFor,
  suspicionKey,
  windowsMayConclude,
} from './detector.state';
import { Finding, WatchedMachine } from './rules';

/**
 * The detector's decisions, one named step each (paper §4):
 *
 *  observe a message about a machine (folded in first):
 *    evaluateMachine  — the machine's rules look at it now: confirm, or suspect (and probe), or clear
 *  observe a HeartbeatAcked:
 *    probeAnswered    — the agent answered in time: the suspicion is cleared
 *  observe DetectionPaused / DetectionResumed (from the host: its own input had a gap):
 *    startOver        — on resume, every open suspicion is withdrawn: its evidence and its probe's
 *                       answer may have been lost in the gap, so only fresh evidence and a fresh probe count
 *  tick (time passed):
 *    1. expiredProbes        — probes unanswered past their timeout confirm the fault
 *    2. evaluateEveryMachine — every watched machine's rules at `now` (time-based windows)
 *
 * While blind nothing is concluded from time (no tick step runs, time-windowed rules are skipped) and
 * during the grace period after, time-windowed rules are skipped: missing input is not evidence of a
 * fault. Explicit signals confirm throughout, and acks still clear.
 *
 * Verdict ids come from a counter in the state (`<machine>/<rule>/<n>`), so deciding twice from the same
 * state yields the same ids.
 */
export function decideDetector(config: DetectorConfig) {
  return (command: DetectorCommand, state: DetectorState): DetectorDraft[] => {
    if (command.kind === 'tick') {
      if (state.blind !== null) return [];
      const confirmations = expiredProbes(state, command.now);
      const alreadyConfirmed = new Set(confirmations.map((d) => (d.type === 'FaultConfirmed' ? d.data.machineId : '')));
      return [...confirmations, ...evaluateEveryMachine(config, state, command.now, alreadyConfirmed)];
    }
    const { message, now } = command;
    switch (message.type) {
      case 'JobStarted':
      case 'DetectionPaused':
        return [];
      case 'DetectionResumed':
        return startOver(state, message);
      case 'HeartbeatAcked':
        return probeAnswered(state, message);
      case 'MachineRegistered':
      case 'MachineRoleChanged':
      case 'MachineDeregistered':
      case 'GpuActivitySampled':
      case 'RolePhaseChanged':
      case 'RolloutThroughputSampled':
      case 'AgentFaultSignalled': {
        // Rules judge the machine with this message folded in (an explicit signal confirms at once).
        const after = evolveDetector(config, state, message, Date.parse(message.occurredAt));
        const machine = after.machines[message.data.machineId];
        return machine ? evaluateMachine(config, after, machine, now, counterFrom(state)) : [];
      }
      default:
        return assertNever(message, 'detector input');
    }
  };
}

/** Verdict numbers handed out during one decision. */
type NextSeq = () => number;
const counterFrom = (state: DetectorState): NextSeq => {
  let seq = state.verdictSeq;
  return () => ++seq;
};

/** The agent answered the heartbeat probe: the machine is alive, the suspicion ends (paper §4 ➁). */
function probeAnswered(state: DetectorState, ack: MessageOf<'HeartbeatAcked'>): DetectorDraft[] {
  const open = Object.values(state.suspicions).find((s) => s.probe?.probeId === ack.data.probeId);
  if (!open || state.machines[open.machineId]?.status !== 'watching') return [];
  const latencyMs = Math.max(0, Date.parse(ack.data.ackedAt) - open.probe!.sentAt);
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

/** The gap closed: open suspicions are withdrawn, to be raised again only on evidence seen after it. */
function startOver(state: DetectorState, resumed: MessageOf<'DetectionResumed'>): DetectorDraft[] {
  const seconds = Math.round(resumed.data.blindMs / 1000);
  return Object.values(state.suspicions).flatMap((s) => {
    const machine = state.machines[s.machineId];
    if (!machine) return [];
    return [
      draft('SuspicionCleared', {
        verdictId: s.verdictId,
        machineId: s.machineId,
        role: machine.role,
        rule: s.rule,
        evidence: s.evidence,
        reason: `the detector was blind for ${seconds} s (${resumed.data.reason}): the evidence${s.probe ? ' and the probe' : ''} start over`,
      }),
    ];
  });
}

/** Probes nobody answered in time: an agent that cannot answer means the machine (or its network) is gone, not only the process. */
function expiredProbes(state: DetectorState, now: number): DetectorDraft[] {
  const out: DetectorDraft[] = [];
  for (const s of Object.values(state.suspicions)) {
    const machine = state.machines[s.machineId];
    if (!s.probe || !machine || machine.status !== 'watching' || now < s.probe.sentAt + s.probe.timeoutMs) continue;
    const evidence: Evidence = { ...s.evidence, probe: { probeId: s.probe.probeId, result: 'timed-out' } };
    out.push(confirmed(machine, s.rule, s.verdictId, s.since, evidence, true, now));
  }
  return out;
}

/** Time-based rules on every machine; a trainer confirmed here mutes its group's echoes within the same tick. */
function evaluateEveryMachine(config: DetectorConfig, state: DetectorState, now: number, skip: ReadonlySet<string>): DetectorDraft[] {
  const nextSeq = counterFrom(state);
  const out: DetectorDraft[] = [];
  let view = state;
  for (const machine of Object.values(state.machines)) {
    if (skip.has(machine.machineId)) continue;
    const drafts = evaluateMachine(config, view, machine, now, nextSeq);
    out.push(...drafts);
    for (const d of drafts) if (d.type === 'FaultConfirmed') view = markConfirmed(view, d.data.machineId, now);
  }
  return out;
}

/** One machine's rules at `now`: at most one confirmed fault per machine — the rest is the controller's business. */
function evaluateMachine(config: DetectorConfig, state: DetectorState, machine: WatchedMachine, now: number, nextSeq: NextSeq): DetectorDraft[] {
  if (machine.status !== 'watching') return [];
  const out: DetectorDraft[] = [];
  const ctx = contextFor(state, machine, now);
  const windowsMay = windowsMayConclude(state, now);
  for (const rule of rulesFor(config, machine)) {
    if (rule.timeWindowed && !windowsMay) continue;
    const open = state.suspicions[suspicionKey(machine.machineId, rule.name)];
    const finding: Finding | null = rule.evaluate(state.ruleStates[machine.machineId]?.[rule.name], ctx);
    if (finding === null) {
      // Evidence gone (e.g. output resumed while the probe was out): the suspicion ends here.
      if (open) {
        out.push(
          draft('SuspicionCleared', {
            verdictId: open.verdictId,
            machineId: machine.machineId,
            role: machine.role,
            rule: rule.name,
            evidence: open.evidence,
            reason: 'the evidence no longer holds',
          }),
        );
      }
      continue;
    }
    if (finding.verdict === 'confirm') {
      if (rule.name === 'trainer-idle' && trainerGroupAlreadyConfirmed(state, machine, now)) continue;
      out.push(
        confirmed(
          machine,
          rule.name,
          open?.verdictId ?? verdictIdFor(machine, rule.name, nextSeq()),
          finding.since,
          finding.evidence,
          finding.machineFaulty,
          now,
        ),
      );
      return out;
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

function confirmed(
  machine: WatchedMachine,
  rule: string,
  verdictId: string,
  since: number,
  evidence: Evidence,
  machineFaulty: boolean,
  now: number,
): DetectorDraft {
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

const verdictIdFor = (machine: WatchedMachine, rule: string, seq: number) => `${machine.machineId}/${rule}/${seq}`;
