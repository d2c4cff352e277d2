/**
 * The shape of every piece of robustrl domain logic (after emmett's Decider).
 *
 * Pure: no clock, no I/O, no randomness. Time arrives inside commands and events, which is what lets
 * the same rules run in the services (wall clock, Kafka) and in the simulator (virtual clock).
 */
export interface Decider<State, Command, Event, Output = Event> {
  /**
   * `Output` differs from `Event` when the shell completes what decide returns before folding it
   * back in — robustrl's deciders return drafts (type + data) and the shell adds the envelope.
   */
  decide(command: Command, state: State): Output[];
  evolve(state: State, event: Event): State;
  initialState(): State;
}

/** A read model folded from events, e.g. ETTR or the downtime ledger. */
export interface Projection<View, Event> {
  evolve(view: View, event: Event): View;
  initialView(): View;
}

export function foldEvents<State, Event>(evolve: (s: State, e: Event) => State, initial: State, events: readonly Event[]): State {
  return events.reduce(evolve, initial);
}

/** Exhaustiveness guard for `switch (x.type)`: a new message type becomes a compile error here. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
