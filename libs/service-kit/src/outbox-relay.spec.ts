import { Logger } from '@nestjs/common';
import { InProcessBus, MessageBus } from '@robustrl/bus';
import { decodeMessage, RobustrlMessage, Topics } from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';
import { timeline } from '@robustrl/testing/job-timeline';
import { OutboxRelay } from './outbox-relay';

/**
 * The relay's latency path: outputs published from memory right after their commit, in commit order,
 * the marks written beside the publishes; a publish the bus refuses leaves them to the relay from the store.
 */
describe('OutboxRelay: committed outputs', () => {
  const msg = timeline('job-relay');
  let store: EventStore;
  let bus: InProcessBus;
  let gate: { open: () => void; wait: Promise<void> } | null;
  let refuse: boolean;
  const publishes: string[][] = [];
  let relay: OutboxRelay;

  const step = (i: number) => msg(i, 'TrainingStepCompleted', { step: i, batchId: `b${i}`, durationMs: 1 });
  const committed = async (...messages: RobustrlMessage[]) => {
    await store.outbox.enqueue(store.dataSource.manager, 'relay-spec', messages);
    return messages;
  };
  const onBus = () =>
    bus
      .read(Topics.training)
      .map((r) => decodeMessage(r.value))
      .flatMap((d) => (d.ok ? [(d.message.data as { step: number }).step] : []));

  beforeEach(async () => {
    store = await EventStore.open({ kind: 'pglite' });
    bus = new InProcessBus();
    gate = null;
    refuse = false;
    publishes.length = 0;
    const gated: MessageBus = Object.assign(Object.create(bus) as MessageBus, {
      publish: async (m: RobustrlMessage | readonly RobustrlMessage[]) => {
        const list = Array.isArray(m) ? (m as readonly RobustrlMessage[]) : [m as RobustrlMessage];
        publishes.push(list.map((x) => x.eventId));
        if (gate) await gate.wait;
        if (refuse) throw new Error('broker unreachable');
        return bus.publish(m);
      },
    });
    relay = new OutboxRelay(gated, store, 'relay-spec', new Logger('relay-spec'));
    // The first relay reads the store (nothing pending yet): afterwards the committed path is open.
    expect(await relay.relay()).toBe(true);
  });
  afterEach(async () => {
    relay.stopRetrying();
    await bus.close();
    await store.close();
  });

  const closedGate = () => {
    let open!: () => void;
    const wait = new Promise<void>((resolve) => (open = resolve));
    return { open, wait };
  };

  it('commits arriving during a publish leave together in the next one, in commit order, and all end up marked', async () => {
    gate = closedGate();
    const first = relay.relayCommitted(await committed(step(1)));
    const second = relay.relayCommitted(await committed(step(2), step(3)));
    const third = relay.relayCommitted(await committed(step(4)));
    const held = gate;
    gate = null;
    held.open();
    expect(await Promise.all([first, second, third])).toEqual([true, true, true]);
    expect(onBus()).toEqual([1, 2, 3, 4]);
    expect(publishes.map((p) => p.length)).toEqual([1, 3]);
    // The marks are written beside the publishes; a relay from the store waits for them and finds nothing to publish again.
    expect(await relay.relay()).toBe(true);
    expect(await store.outbox.pending(store.dataSource.manager, 'relay-spec')).toEqual([]);
    expect(onBus()).toEqual([1, 2, 3, 4]);
  });

  it('a commit after the loop ended starts a new one (nothing waits for the retry timer)', async () => {
    expect(await relay.relayCommitted(await committed(step(1)))).toBe(true);
    expect(await relay.relayCommitted(await committed(step(2)))).toBe(true);
    expect(onBus()).toEqual([1, 2]);
  });

  it('a refused publish leaves it and what queued behind it to the relay from the store, in order, published once', async () => {
    refuse = true;
    gate = closedGate();
    const first = relay.relayCommitted(await committed(step(1)));
    const second = relay.relayCommitted(await committed(step(2)));
    const held = gate;
    gate = null;
    held.open();
    expect(await first).toBe(false);
    expect(await second).toBe(false);
    expect(onBus()).toEqual([]);
    // Still refused: a later commit goes through the store (older ones first) and fails the same way.
    expect(await relay.relayCommitted(await committed(step(3)))).toBe(false);
    refuse = false;
    expect(await relay.relayCommitted(await committed(step(4)))).toBe(true);
    expect(onBus()).toEqual([1, 2, 3, 4]);
    expect(await store.outbox.pending(store.dataSource.manager, 'relay-spec')).toEqual([]);
  });
});
