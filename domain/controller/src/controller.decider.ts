import { Decider, JSON_STATE_CODEC } from '@robustrl/domain-kit';
import { decideController } from './controller.decide';
import { evolveController } from './controller.evolve';
import {
  ControllerCommand,
  ControllerData,
  ControllerDraft,
  ControllerEvent,
  ControllerSettings,
  ControllerState,
  DEFAULT_CONTROLLER_SETTINGS,
  initialControllerState,
  rebuildControllerIndex,
} from './controller.state';

export * from './controller.state';

/**
 * The controller of one job: the recovery workflow of paper Figure 7 as a decider.
 *
 *  - `observe` a message at `now`: a confirmed fault is decided on; command outcomes move a recovery
 *    on; membership, steps and checkpoints keep the picture current. A command outcome and a life sign
 *    count at `now`, not at the sender's clock.
 *  - `tick`: commands that got no answer in time count as failed.
 *
 * Every decision is a RecoveryDecided naming the rule that fired, followed by the commands that carry
 * it out. Ids are derived from the verdict (`<verdict>/recovery`, `<recovery>/<n>`) so deciding on a
 * redelivered verdict yields nothing new and a rebuilt controller issues the same ids. State, evolve
 * and the decision steps live in `controller.state.ts`, `controller.evolve.ts` and `controller.decide.ts`;
 * the fault policies are listed in order in `FAULT_POLICIES`, the escalation rules in `escalation-rules.ts`.
 *
 * It evolves in place (a job of thousands of machines) and keeps its unfinished recoveries
 * indexed (`ControllerIndex`); a snapshot holds the facts and decoding rebuilds the index.
 */
export function createControllerDecider(
  overrides: Partial<ControllerSettings> = {},
): Decider<ControllerState, ControllerCommand, ControllerEvent, ControllerDraft> {
  const settings: ControllerSettings = { ...DEFAULT_CONTROLLER_SETTINGS, ...overrides };
  return {
    initialState: initialControllerState,
    decide: decideController(settings),
    evolve: (state, event) => evolveController(state, event, Date.parse(event.occurredAt)),
    // A restart and the restarted machine's report-in are timed by when the controller heard them: the
    // machine's clock may be minutes off (docs/contributors/detection.md "Whose clock"). Replays use the facts' own times.
    observe: (state, event, now) => evolveController(state, event, Date.parse(event.occurredAt), now),
    evolution: 'in-place',
    snapshotCodec: {
      encode: ({ index: _derived, ...data }) => JSON_STATE_CODEC.encode(data),
      decode: (data) => rebuildControllerIndex(JSON_STATE_CODEC.decode(data) as ControllerData),
    },
  };
}

export const ControllerDecider = createControllerDecider();
