import { discountBlindInterval } from './blind-interval';
import { DetectionRule } from './detection-rule';

export interface TrainerIdleState {
  /** Idle time accrued inside the training phase in earlier training segments. */
  accruedMs: number;
  /** Start of the current idle stretch inside the training phase, null outside it. */
  accruingFrom: number | null;
  /** When the idle evidence began (first idle moment of the stretch), for the detection latency. */
  evidenceSince: number | null;
}

/**
 * Trainer rule (paper §4): zero TensorCore activity for the window *while in the training phase*.
 *
 * Phases without GPU work — context switch, weight update, advantage computation, checkpoint — pause
 * the clock instead of resetting it, so a hung trainer that keeps flipping phases is still caught,
 * and resetting on activity only means any real GPU work clears the evidence. Time without samples
 * counts as idle: a dead machine sends nothing.
 */
export const TrainerIdleRule: DetectionRule<TrainerIdleState> = {
  name: 'trainer-idle',
  timeWindowed: true,
  appliesTo: (role) => role === 'trainer',
  initialState: () => ({ accruedMs: 0, accruingFrom: null, evidenceSince: null }),

  observe(state, message, at, { machine }) {
    const inTraining = machine.phase === 'training';
    if (message.type === 'GpuActivitySampled') {
      if (message.data.tensorActive <= 0) return state;
      // Read again after a restart, an activity sample may come after facts that followed it. One older
      // than the idle evidence says nothing about that stretch; one older than the training phase we are
      // in can only clear up to the phase's start (the idle stretch cannot begin before it). Either way
      // the machine never looks idle for longer than it did in the original order.
      if (state.evidenceSince !== null && at < state.evidenceSince) return state;
      const from = inTraining ? Math.max(at, machine.phaseSince) : null;
      return { accruedMs: 0, accruingFrom: from, evidenceSince: from };
    }
    if (message.type === 'RolePhaseChanged') {
      const wasTraining = machine.phase === 'training';
      const entersTraining = message.data.phase === 'training';
      let { accruedMs, accruingFrom, evidenceSince } = state;
      if (wasTraining && !entersTraining && accruingFrom !== null) {
        accruedMs += Math.max(0, at - accruingFrom);
        accruingFrom = null;
      }
      if (entersTraining && accruingFrom === null) {
        accruingFrom = at;
        evidenceSince ??= at;
      }
      return { accruedMs, accruingFrom, evidenceSince };
    }
    return state;
  },

  evaluate(state, { now, machine, settings }) {
    const idleMs = state.accruedMs + (state.accruingFrom === null ? 0 : Math.max(0, now - state.accruingFrom));
    if (idleMs < settings.trainerIdleWindowMs || state.evidenceSince === null) return null;
    return {
      verdict: 'confirm',
      since: state.evidenceSince,
      machineFaulty: false,
      evidence: {
        windowSeconds: settings.trainerIdleWindowMs / 1000,
        lastActivityAt: machine.lastActivityAt === null ? null : new Date(machine.lastActivityAt).toISOString(),
        faultEvidenceSince: new Date(state.evidenceSince).toISOString(),
        detail: `no TensorCore activity for ${Math.round(idleMs / 1000)} s inside the training phase`,
      },
    };
  },

  // Idle time accrued before the gap stays accrued; the stretch in progress resumes after it.
  discountBlindness: (state, blind) => (state.accruingFrom === null ? state : { ...state, accruingFrom: discountBlindInterval(state.accruingFrom, blind) }),
  dueAt(state, { settings }) {
    if (state.evidenceSince === null) return null;
    if (state.accruingFrom === null) return state.accruedMs >= settings.trainerIdleWindowMs ? state.evidenceSince : null;
    return state.accruingFrom + settings.trainerIdleWindowMs - state.accruedMs;
  },
};
