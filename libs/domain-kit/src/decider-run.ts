import type { Decider } from './decider';
import { foldEvents } from './decider';
import { JobCommand, observe, tick } from './job-command';
import { step } from './step';

/**
 * A multi-step given / when / then for job deciders: fold the `given` history, then feed inputs and
 * ticks one at a time through `step` — exactly what the hosts do — and keep everything emitted.
 *
 *   const run = DeciderRun.for(decider, toEvent).given([...history]);
 *   run.observe(message, now); run.tick(now);
 *   expect(run.emitted.map((e) => e.output.type)).toEqual([...]);
 *
 * `toEvent(output, now)` turns an output into the event the host would publish (in specs: the
 * output with an `occurredAt`, or a timeline message).
 *
 * An `in-place` decider's state belongs to the run: `state` is updated by every step and `fold`.
 */
export class DeciderRun<State, Input extends Event, Event, Output> {
  /** Every output in order, with the step's time and the event it was folded as. */
  readonly emitted: Array<{ now: number; output: Output; event: Event }> = [];

  private constructor(
    private readonly decider: Decider<State, JobCommand<Input>, Event, Output>,
    private readonly toEvent: (output: Output, now: number) => Event,
    public state: State,
  ) {}

  static for<State, Input extends Event, Event, Output>(
    decider: Decider<State, JobCommand<Input>, Event, Output>,
    toEvent: (output: Output, now: number) => Event,
  ) {
    return {
      given: (history: readonly Event[] = []) => new DeciderRun(decider, toEvent, foldEvents(decider.evolve, decider.initialState(), history)),
    };
  }

  /** Decide on one command and fold what it led to; returns this step's outputs. */
  send(command: JobCommand<Input>): Output[] {
    const { now } = command;
    const result = step(this.decider, this.state, command, (output) => this.toEvent(output, now));
    this.state = result.state;
    result.outputs.forEach((output, i) => this.emitted.push({ now, output, event: result.events[i] }));
    return result.outputs;
  }

  observe(message: Input, now: number): Output[] {
    return this.send(observe(message, now));
  }

  tick(now: number): Output[] {
    return this.send(tick(now));
  }

  /** Fold an event without deciding on it (something the decider only learns from). */
  fold(event: Event): void {
    this.state = this.decider.evolve(this.state, event);
  }

  outputs(): Output[] {
    return this.emitted.map((e) => e.output);
  }
}
