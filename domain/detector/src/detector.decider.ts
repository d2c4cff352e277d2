import { Decider, JSON_STATE_CODEC } from '@robustrl/domain-kit';
import { rebuildIndex } from './detector-reindex';
import { decideDetector } from './detector.decide';
import { evolveDetector } from './detector.evolve';
import { reportTime } from './report-time';
import { DetectorCommand, DetectorConfig, DetectorDraft, DetectorEvent, DetectorState, initialDetectorState, PAPER_DETECTOR_CONFIG } from './detector.state';

export * from './detector.state';

/**
 * The detector of one job (paper §4), as a decider: time is an input, rules are pluggable.
 *
 *  - `observe`: a message about the job arrived at `now` (telemetry, membership, heartbeats…); rules of
 *    the machine it concerns fold it in and are evaluated at once (explicit signals confirm immediately).
 *  - `tick`: time passed; the machines due (a window may have run out, a probe timed out) are evaluated.
 *
 * `in-place`: evolve updates the state it is given (its host owns it), so a telemetry sample costs
 * O(1) in the machines of the job (O(log N) for a rollout's throughput: its rank among its peers) and
 * a tick with nothing due O(1). Snapshots leave the derived index out; `decode` rebuilds it.
 *
 * Outputs are FaultSuspected / HeartbeatProbeRequested / FaultConfirmed / SuspicionCleared drafts; the
 * detector's own outputs are folded back in by `evolve` like any other event. State, evolve and the
 * decision steps live in `detector.state.ts`, `detector.evolve.ts` and `detector.decide.ts`.
 */
export function createDetectorDecider(options: Partial<DetectorConfig> = {}): Decider<DetectorState, DetectorCommand, DetectorEvent, DetectorDraft> {
  const config: DetectorConfig = { rules: options.rules ?? PAPER_DETECTOR_CONFIG.rules, defaults: options.defaults ?? PAPER_DETECTOR_CONFIG.defaults };
  return {
    initialState: () => initialDetectorState(config),
    decide: decideDetector(config),
    evolve: (state, event) => evolveDetector(config, state, event, Date.parse(event.occurredAt)),
    // As it arrives, a machine's report is timed by the detector's clock too (report-time.ts).
    observe: (state, event, now) => evolveDetector(config, state, event, reportTime(event, now)),
    evolution: 'in-place',
    snapshotCodec: {
      encode: ({ index: _derived, ...state }) => JSON_STATE_CODEC.encode(state),
      decode: (data) => {
        const state = JSON_STATE_CODEC.decode(data) as DetectorState;
        // A snapshot taken before a setting existed (rolloutStallWindowMs came later) gets its default.
        state.settings = { ...config.defaults, ...state.settings };
        return rebuildIndex(config, state);
      },
    },
  };
}

/** The detector with the paper's rules and defaults. */
export const DetectorDecider = createDetectorDecider();
