import type { Decider } from './decider';
import type { JobCommand } from './job-command';

export interface Stepped<State, Output, Event> {
  /** The state after the input (when observed) and every output were folded in. */
  state: State;
  /** What decide returned, in order. */
  outputs: Output[];
  /** The outputs as the host published them (enveloped by `toEvent`), in the same order. */
  events: Event[];
}

/** Whether the decider updates the state it is given (see `Decider.evolution`). */
export const evolvesInPlace = (decider: Pick<Decider<unknown, never, never, never>, 'evolution'>): boolean => decider.evolution === 'in-place';

/**
 * One step of a hosted job decider — the only place the "decide, then fold" loop is written; the
 * services' DecidingConsumer, the simulator's host and the specs' runs all call it.
 *
 * A `pure` decider (the default):
 *   1. decide on the state as it was before the input;
 *   2. fold the input (for `observe`): it is part of the stream the state is a fold of;
 *   3. envelope each output with `toEvent` (the host stamps ids and `now`) and fold it in order.
 * Pure as long as `toEvent` is: the host commits the events and only then adopts `state`, so a step
 * that fails to commit leaves the host's state untouched.
 *
 * An `in-place` decider: the input is folded first (evolve updates `state` itself), decide reads the
 * state with the input in, then the outputs are folded as in 3. `state` is the host's: a step that fails
 * to commit has changed it, and the host reloads the job (snapshot and what followed) instead of keeping it.
 */
export function step<State, Input extends Event, Event, Output>(
  decider: Decider<State, JobCommand<Input>, Event, Output>,
  state: State,
  command: JobCommand<Input>,
  toEvent: (output: Output, index: number) => Event,
): Stepped<State, Output, Event> {
  const seen = foldInput(decider, state, command);
  return settle(decider, seen, command, decider.decide(command, seen), toEvent);
}

/**
 * The state a decision on `command` reads: for an `in-place` decider observing an input, `state` with
 * the input folded in (updated in place); otherwise `state` as it is. A host that must see a decision
 * before enveloping it calls this, then `decider.decide`, then `settle` with what it returned.
 */
export function foldInput<State, Input extends Event, Event, Output>(
  decider: Decider<State, JobCommand<Input>, Event, Output>,
  state: State,
  command: JobCommand<Input>,
): State {
  return command.kind === 'observe' && evolvesInPlace(decider) ? observed(decider, state, command) : state;
}

/**
 * Steps 2 and 3 alone, for a host that had to see the decision before enveloping it (the services'
 * tick opens the trace span its outputs belong to from what was decided).
 *
 * For an `in-place` decider `state` is what `foldInput` returned (the input is in already), so only
 * the outputs are folded; for a `pure` one the input is folded here, before the outputs.
 */
export function settle<State, Input extends Event, Event, Output>(
  decider: Decider<State, JobCommand<Input>, Event, Output>,
  state: State,
  command: JobCommand<Input>,
  outputs: Output[],
  toEvent: (output: Output, index: number) => Event,
): Stepped<State, Output, Event> {
  let next = command.kind === 'observe' && !evolvesInPlace(decider) ? observed(decider, state, command) : state;
  const events = outputs.map(toEvent);
  for (const event of events) next = decider.evolve(next, event);
  return { state: next, outputs, events };
}

/** The observed input folded: by `observe` at the host's `now` where the decider has one, else as a fact. */
function observed<State, Input extends Event, Event, Output>(
  decider: Decider<State, JobCommand<Input>, Event, Output>,
  state: State,
  command: JobCommand<Input> & { kind: 'observe' },
): State {
  return decider.observe ? decider.observe(state, command.message, command.now) : decider.evolve(state, command.message);
}
