import { Draft, RobustrlMessage } from '@robustrl/contracts';
import { Decider } from '@robustrl/domain-kit';
import { SimKernel } from './sim-kernel';

type HostCommand = { kind: 'observe'; message: RobustrlMessage; now: number } | { kind: 'tick'; now: number };

/**
 * Hosts one of the services' real deciders on the virtual clock, the way the services' DecidingConsumer
 * does on the wall clock: decide on the state before the input, then fold the input and the outputs;
 * outputs are enveloped with `now` and published. Its own outputs come back on the bus and are skipped
 * (the service's inbox does the same), and `tick` is driven by the agenda instead of a timer.
 */
export class DeciderHost<State> {
  private state: State;

  constructor(
    private readonly kernel: SimKernel,
    readonly name: string,
    private readonly decider: Decider<State, never, never, Draft>,
    inputTypes: readonly string[],
    private readonly tickMs: number | null,
  ) {
    this.state = decider.initialState();
    kernel.subscribe(inputTypes, (m) => {
      if (m.source !== name) this.observe(m);
    });
  }

  start(): void {
    if (this.tickMs !== null) this.scheduleTick();
  }

  private scheduleTick(): void {
    this.kernel.after(this.tickMs!, () => {
      this.tick();
      this.scheduleTick();
    });
  }

  private get d(): Decider<State, HostCommand, RobustrlMessage, Draft> {
    return this.decider as unknown as Decider<State, HostCommand, RobustrlMessage, Draft>;
  }

  private observe(input: RobustrlMessage): void {
    const before = this.state;
    const drafts = this.d.decide({ kind: 'observe', message: input, now: this.kernel.now }, before);
    let next = this.d.evolve(before, input);
    const emitted = drafts.map((dr) => this.kernel.message(dr.type, dr.data as never, this.name, input.eventId));
    for (const m of emitted) next = this.d.evolve(next, m);
    this.state = next;
    for (const m of emitted) this.kernel.publish(m);
  }

  private tick(): void {
    const drafts = this.d.decide({ kind: 'tick', now: this.kernel.now }, this.state);
    if (drafts.length === 0) return;
    const emitted = drafts.map((dr) => this.kernel.message(dr.type, dr.data as never, this.name));
    for (const m of emitted) this.state = this.d.evolve(this.state, m);
    for (const m of emitted) this.kernel.publish(m);
  }
}
