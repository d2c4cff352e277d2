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
  /**
   * Folds an input the host observed at `now` (its own clock), where that must differ from folding it
   * as a stored fact: a decider that judges liveness by when it heard from a machine bounds the time a
   * machine's clock wrote on its report by when the report arrived (the detector, docs/contributors/detection.md).
   * `step` calls it for the input it observes; replays of stored facts call `evolve`. Absent: `evolve`.
   */
  observe?(state: State, event: Event, now: number): State;
  initialState(): State;
  /**
   * `pure` (the default): evolve returns a new state and leaves the one it was given as it was.
   *
   * `in-place`: evolve may update the state it is given and return it — a job of thousands of machines
   * cannot copy its machine table for every telemetry sample. The state then belongs to its host:
   *  - `step` folds an observed input before deciding on it (decide sees the state with the input in);
   *  - a host never reuses a state it passed to evolve (specs build a fresh one per case);
   *  - a host whose step did not commit reloads the job (snapshot and what followed it) rather than
   *    keep what evolve changed.
   * decide stays pure in both: it reads the state, never writes it.
   */
  readonly evolution?: 'pure' | 'in-place';
  /**
   * How the state is written into a snapshot and read back. Default: JSON, with `Map` and `Set` kept
   * (`encodeState` / `decodeState`). A decider whose state holds derived indexes (e.g. deadlines due)
   * can leave them out and rebuild them in `decode`.
   */
  readonly snapshotCodec?: StateCodec<State>;
}

/** A state as a snapshot holds it: `encode` returns JSON-safe data, `decode(encode(s))` behaves as `s`. */
export interface StateCodec<State> {
  encode(state: State): unknown;
  decode(data: unknown): State;
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
