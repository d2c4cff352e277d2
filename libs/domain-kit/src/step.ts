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

/**
 * One step of a hosted job decider — the only place the "decide, then fold" loop is written; the
 * services' DecidingConsumer, the simulator's host and the specs' runs all call it:
 *
 *   1. decide on the state as it was before the input;
 *   2. fold the input (for `observe`): it is part of the stream the state is a fold of;
 *   3. envelope each output with `toEvent` (the host stamps ids and `now`) and fold it in order.
 *
 * Pure as long as `toEvent` is: the host commits the events and only then adopts `state`, so a step
 * that fails to commit leaves the host's state untouched.
 */
export function step<State, Input extends Event, Event, Output>(
  decider: Decider<State, JobCommand<Input>, Event, Output>,
  state: State,
  command: JobCommand<Input>,
  toEvent: (output: Output, index: number) => Event,
): Stepped<State, Output, Event> {
  return settle(decider, state, command, decider.decide(command, state), toEvent);
}

/**
 * Steps 2 and 3 alone, for a host that had to see the decision before enveloping it (the services'
 * tick opens the trace span its outputs belong to from what was decided).
 */
export function settle<State, Input extends Event, Event, Output>(
  decider: Decider<State, JobCommand<Input>, Event, Output>,
  state: State,
  command: JobCommand<Input>,
  outputs: Output[],
  toEvent: (output: Output, index: number) => Event,
): Stepped<State, Output, Event> {
  let next = command.kind === 'observe' ? decider.evolve(state, command.message) : state;
  const events = outputs.map(toEvent);
  for (const event of events) next = decider.evolve(next, event);
  return { state: next, outputs, events };
}
