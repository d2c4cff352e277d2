import { Draft, RobustrlMessage } from '@robustrl/contracts';
import { Decider, JobCommand, observe, step, tick } from '@robustrl/domain-kit';
import { SimKernel } from './sim-kernel';

/**
 * Hosts one of the services' real deciders on the virtual clock, the way the services' DecidingConsumer
 * does on the wall clock: both call the kit's one `step` (decide on the state before the input, then fold
 * the input and the outputs); outputs are enveloped with `now` and published. Its own outputs come back
 * on the bus and are skipped (the service's inbox does the same), and `tick` is driven by the agenda
 * instead of a timer.
 */
export class DeciderHost<State, Event extends RobustrlMessage, Input extends Event> {
  private state: State;

  constructor(
    private readonly kernel: SimKernel,
    readonly name: string,
    private readonly decider: Decider<State, JobCommand<Input>, Event, Draft>,
    inputTypes: readonly Input['type'][],
    private readonly tickMs: number | null,
  ) {
    this.state = decider.initialState();
    // The kernel hands over only the subscribed types, i.e. this decider's inputs.
    kernel.subscribe(inputTypes, (m) => {
      if (m.source !== name) this.run(observe(m as Input, kernel.now), m.eventId);
    });
  }

  start(): void {
    if (this.tickMs !== null) this.scheduleTick();
  }

  private scheduleTick(): void {
    this.kernel.after(this.tickMs!, () => {
      this.run(tick(this.kernel.now), null);
      this.scheduleTick();
    });
  }

  private run(command: JobCommand<Input>, causationId: string | null): void {
    const { state, events } = step(this.decider, this.state, command, (d) => this.kernel.message(d.type, d.data as never, this.name, causationId) as Event);
    this.state = state;
    for (const m of events) this.kernel.publish(m);
  }
}
