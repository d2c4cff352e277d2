import { Decider, foldEvents } from './decider';
import type { JobCommand } from './job-command';

/**
 * given / when / then for deciders:
 *
 *   DeciderSpecification.for(decider).given([...events]).when(command).then([...expected])
 *
 * `then` compares with a deep-equality function supplied by the caller (jest's `expect().toEqual` in
 * our tests), so the kit itself has no test-framework dependency.
 */
export const DeciderSpecification = {
  for<State, Command, Event, Output = Event>(decider: Decider<State, Command, Event, Output>) {
    return {
      given(events: readonly Event[]) {
        return {
          when(command: Command) {
            const run = () => decider.decide(command, stateFor(decider, events, command));
            return {
              then(expected: readonly Output[], assertEqual: (actual: Output[], expected: readonly Output[]) => void) {
                assertEqual(run(), expected);
              },
              thenNothingHappened(assertEqual: (actual: Output[], expected: readonly Output[]) => void) {
                assertEqual(run(), []);
              },
              thenThrows(check: (error: unknown) => boolean) {
                let thrown: unknown = undefined;
                let didThrow = false;
                try {
                  run();
                } catch (err) {
                  didThrow = true;
                  thrown = err;
                }
                if (!didThrow) throw new Error('expected decide() to throw, it returned events');
                if (!check(thrown)) throw new Error(`decide() threw an unexpected error: ${String(thrown)}`);
              },
            };
          },
        };
      },
    };
  },
};

/**
 * The state `decide` reads for `command` after `events`: as the kit's `step` builds it — an `in-place`
 * decider observing an input decides with the input folded in.
 */
function stateFor<State, Command, Event, Output>(decider: Decider<State, Command, Event, Output>, events: readonly Event[], command: Command): State {
  const state = foldEvents(decider.evolve, decider.initialState(), events);
  const job = command as Partial<JobCommand<Event>>;
  if (decider.evolution !== 'in-place' || job.kind !== 'observe' || job.message === undefined) return state;
  return decider.observe && job.now !== undefined ? decider.observe(state, job.message, job.now) : decider.evolve(state, job.message);
}

/**
 * given / then for projections: fold the given events from the initial view, then check the view.
 *
 *   ProjectionSpecification.for(projection).given([...events]).then((view) => expect(...))
 */
export const ProjectionSpecification = {
  for<View, Event>(projection: { evolve(view: View, event: Event): View; initialView(): View }) {
    return {
      given(events: readonly Event[]) {
        return {
          then(check: (view: View) => void) {
            check(foldEvents(projection.evolve, projection.initialView(), events));
          },
        };
      },
    };
  },
};
