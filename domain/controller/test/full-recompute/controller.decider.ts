/**
 * The controller as it was before it evolved in place, as a decider: the reference the in-place
 * controller is held to (`controller-in-place.spec.ts`), spec code only (see controller.state.ts).
 */
import { Decider } from '@robustrl/domain-kit';
import { decideController } from './controller.decide';
import { evolveController } from './controller.evolve';
import {
  ControllerCommand,
  ControllerDraft,
  ControllerEvent,
  ControllerSettings,
  ControllerState,
  DEFAULT_CONTROLLER_SETTINGS,
  initialControllerState,
} from './controller.state';

export * from './controller.state';

/**
 * The controller of one job: the recovery workflow of paper Figure 7 as a decider.
 *
 *  - `observe` a message at `now`: a confirmed fault is decided on; command outcomes move a recovery
 *    on; membership, steps and checkpoints keep the picture current.
 *  - `tick`: commands that got no answer in time count as failed.
 *
 * Every decision is a RecoveryDecided naming the rule that fired, followed by the commands that carry
 * it out. Ids are derived from the verdict (`<verdict>/recovery`, `<recovery>/<n>`) so deciding on a
 * redelivered verdict yields nothing new and a rebuilt controller issues the same ids. State, evolve
 * and the decision steps live in `controller.state.ts`, `controller.evolve.ts` and `controller.decide.ts`;
 * the fault policies are listed in order in `FAULT_POLICIES`, the escalation rules in `escalation-rules.ts`.
 */
export function createControllerDecider(
  overrides: Partial<ControllerSettings> = {},
): Decider<ControllerState, ControllerCommand, ControllerEvent, ControllerDraft> {
  const settings: ControllerSettings = { ...DEFAULT_CONTROLLER_SETTINGS, ...overrides };
  return {
    initialState: initialControllerState,
    decide: decideController(settings),
    evolve: (state, event) => evolveController(state, event, Date.parse(event.occurredAt)),
    observe: (state, event, now) => evolveController(state, event, Date.parse(event.occurredAt), now),
  };
}

export const ControllerDecider = createControllerDecider();
