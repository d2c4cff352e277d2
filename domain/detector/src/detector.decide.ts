import { draft, Evidence, MessageOf, restartsTask } from '@robustrl/contracts';
import { assertNever } from '@robustrl/domain-kit';
import {
  contextFor,
  DetectorCommand,
  DetectorConfig,
  DetectorDraft,
  DetectorState,
  handledAs,
  OpenSuspicion,
  rulesFor,
  seqOf,
  suspicionKey,
  suspicionsOf,
  windowsMayConclude,
} from './detector.state';
import { Finding, WatchedMachine } from './rules';
import { NOT_BACK_AFTER_RESTART, notBackFinding } from './rules/not-back-after-restart';

/**
 * The detector's decisions, one named step each (paper §4):
 *
 *  observe a message about a machine (the host folded it in before deciding: the decider is `in-place`):
 *    evaluateMachine  — the machine's rules look at it now: confirm, or suspect (and probe), or clear
 *  observe a HeartbeatAcked:
 *    probeAnswered    — the agent answered in time: the suspicion is cleared
 *  observe DetectionPaused / DetectionResumed (from the host: its own input had a gap):
 *    startOver        — on resume, every open suspicion is withdrawn: its evidence and its probe's
 *                       answer may have been lost in the gap, so only fresh evidence and a fresh probe count
 *  tick (time passed), over the machines due (the index: a rule's window may have run out, a probe's
 *  timeout passed) — not every machine of the job:
 *    1. expiredProbes       — probes unanswered past their timeout confirm the fault
 *    2. evaluateDueMachines — the due machines' rules at `now` (time-based windows), in the order
 *                             the machines joined (verdict numbers depend on it)
 *
 * While blind nothing is concluded from time (no tick step runs, time-windowed rules are skipped) and
 * during the grace period after, time-windowed rules are skipped: missing input is not evidence of a
 * fault. Explicit signals confirm throughout, and acks still clear.
 *
 * Verdict ids come from a counter in the state (`<machine>/<rule>/<n>`), so deciding twice from the same
 * state yields the same ids. decide only reads the state (the index included).
 */
export function decideDetector(config: DetectorConfig) {
  return (command: DetectorCommand, state: DetectorState): DetectorDraft[] => {
    if (command.kind === 'tick') {
      if (state.blind !== null) return [];
      const due = state.index.inMachineOrder(state.index.deadlines.due(command.now));
      if (due.length === 0) return [];
      const confirmations = expiredProbes(config, state, due, command.now);
      const alreadyConfirmed = new Set(confirmations.map((d) => (d.type === 'FaultConfirmed' ? d.data.machineId : '')));
      return [...confirmations, ...evaluateDueMachines(config, state, due, command.now, alreadyConfirmed)];
    }
    const { message, now } = command;
    switch (message.type) {
      case 'DetectionPaused':
        return [];
      case 'JobStarted':
        // A resumed task: its suspicions are of roles that restarted since (evolve starts the windows over).
        return !restartsTask(message.data) ? [] : withdrawSuspicions(state, 'the task restarted from its checkpoint: every role starts over');
      case 'DetectionResumed':
        return startOver(state, message);
      case 'HeartbeatAcked':
        return probeAnswered(config, state, message);
      case 'MachineRegistered':
      case 'MachineRoleChanged':
      case 'MachineDeregistered':
      case 'GpuActivitySampled':
      case 'RolePhaseChanged':
      case 'RolloutThroughputSampled':
      case 'RolloutRequestsObserved':
      case 'AgentFaultSignalled': {
        // Rules judge the machine with this message folded in (an explicit signal confirms at once):
        // that machine only, whatever the size of the job.
        const machine = state.machines[message.data.machineId];
        return machine ? evaluateMachine(config, state, machine, now, counterFrom(state), NO_VERDICTS_YET) : [];
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
function probeAnswered(config: DetectorConfig, state: DetectorState, ack: MessageOf<'HeartbeatAcked'>): DetectorDraft[] {
  const open = suspicionsOf(config, state, ack.data.machineId).find((s) => s.probe?.probeId === ack.data.probeId);
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
  return withdrawSuspicions(
    state,
    (s) => `the detector was blind for ${seconds} s (${resumed.data.reason}): the evidence${s.probe ? ' and the probe' : ''} start over`,
  );
}

/** Every open suspicion withdrawn, with the reason. */
function withdrawSuspicions(state: DetectorState, reason: string | ((s: OpenSuspicion) => string)): DetectorDraft[] {
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
        reason: typeof reason === 'string' ? reason : reason(s),
      }),
    ];
  });
}

/**
 * Probes nobody answered in time: an agent that cannot answer means the machine (or its network) is gone,
 * not only the process. In the order the suspicions were opened (their verdict numbers).
 */
function expiredProbes(config: DetectorConfig, state: DetectorState, due: readonly string[], now: number): DetectorDraft[] {
  const expired: OpenSuspicion[] = [];
  for (const machineId of due) {
    if (state.machines[machineId]?.status !== 'watching') continue;
    for (const s of suspicionsOf(config, state, machineId)) if (s.probe && now >= s.probe.sentAt + s.probe.timeoutMs) expired.push(s);
  }
  expired.sort((a, b) => seqOf(a.verdictId) - seqOf(b.verdictId));
  return expired.map((s) => {
    const evidence: Evidence = { ...s.evidence, probe: { probeId: s.probe!.probeId, result: 'timed-out' } };
    return confirmed(state.machines[s.machineId], s.rule, s.verdictId, s.since, evidence, true, now);
  });
}

/** Time-based rules on the due machines; a trainer confirmed here mutes its group's echoes within the same tick. */
function evaluateDueMachines(config: DetectorConfig, state: DetectorState, due: readonly string[], now: number, skip: ReadonlySet<string>): DetectorDraft[] {
  const nextSeq = counterFrom(state);
  const out: DetectorDraft[] = [];
  const verdictsThisTick = new Map<string, number>();
  for (const machineId of due) {
    const machine = state.machines[machineId];
    if (!machine || skip.has(machineId)) continue;
    const drafts = evaluateMachine(config, state, machine, now, nextSeq, verdictsThisTick);
    out.push(...drafts);
    for (const d of drafts) if (d.type === 'FaultConfirmed') verdictsThisTick.set(d.data.machineId, now);
  }
  return out;
}

const NO_VERDICTS_YET: ReadonlyMap<string, number> = new Map();

/**
 * One machine's rules at `now`: at most one confirmed fault per machine — the rest is the controller's
 * business. `verdictsThisTick`: machines confirmed earlier in the same decision (not folded yet).
 */
function evaluateMachine(
  config: DetectorConfig,
  state: DetectorState,
  machine: WatchedMachine,
  now: number,
  nextSeq: NextSeq,
  verdictsThisTick: ReadonlyMap<string, number>,
): DetectorDraft[] {
  if (machine.status === 'restarting') {
    // Lost as its task restarted: never registered again (rules/not-back-after-restart.ts). Not while
    // blind: its registration may be among what was not read yet.
    const finding = windowsMayConclude(state, now) ? notBackFinding(machine, now, state.settings) : null;
    return finding
      ? [confirmed(machine, NOT_BACK_AFTER_RESTART, verdictIdFor(machine, NOT_BACK_AFTER_RESTART, nextSeq()), finding.since, finding.evidence, true, now)]
      : [];
  }
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
      if (rule.name === 'trainer-idle' && trainerGroupAlreadyConfirmed(state, machine, now, verdictsThisTick)) continue;
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
 * Looks at the machines with a verdict standing (`confirmedAt`), not at every machine of the job.
 */
function trainerGroupAlreadyConfirmed(state: DetectorState, machine: WatchedMachine, now: number, verdictsThisTick: ReadonlyMap<string, number>): boolean {
  const mutes = (machineId: string, confirmedAt: number) => {
    const m = state.machines[machineId];
    return m !== undefined && machineId !== machine.machineId && handledAs(m.role) === 'trainer' && now - confirmedAt < state.settings.trainerIdleWindowMs;
  };
  for (const [machineId, at] of verdictsThisTick) if (mutes(machineId, at)) return true;
  for (const [machineId, at] of Object.entries(state.confirmedAt)) if (state.machines[machineId]?.status === 'confirmed' && mutes(machineId, at)) return true;
  return false;
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
