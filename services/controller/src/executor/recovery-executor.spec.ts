import { InProcessBus, MessageBus } from '@robustrl/bus';
import { decodeMessage, MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { initialControllerState } from '@robustrl/controller-domain';
import { MachineSpec, Orchestrator } from '@robustrl/orchestrator';
import { EventStore } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { timeline } from '@robustrl/testing/job-timeline';
import { derivedEventId, RecoveryExecutor } from './recovery-executor';

/**
 * The recovery executor in its shell (inbox, outbox, checkpoints) on PGlite and the in-process bus,
 * against a recording orchestrator: what it publishes goes through its outbox, and what it needs
 * beyond the command comes from the controller's state and the store's typed reads.
 */
describe('recovery executor', () => {
  const jobId = 'job-exec';
  let msg: ReturnType<typeof timeline>;
  let store: EventStore;
  let bus: InProcessBus;
  let calls: string[];
  let executors: RecoveryExecutor[];

  const orchestrator = (): Orchestrator => ({
    kind: 'local',
    listMachines: async () => [],
    isolateMachine: async ({ machineId }) => void calls.push(`isolate ${machineId} (deregistered on the bus: ${onBus('MachineDeregistered').length})`),
    requestMachine: async ({ role, zone, hardwareClass, replaces }): Promise<MachineSpec> => {
      calls.push(`request for ${replaces} (deregistered on the bus: ${onBus('MachineDeregistered').length})`);
      return { machineId: `${replaces}-new`, role, zone, hardwareClass };
    },
    releaseMachine: async ({ machineId }) => machineId,
    restartMachines: async () => undefined,
    restartTask: async () => void calls.push('restart task'),
    close: async () => undefined,
  });
  const onBus = <T extends MessageType>(type: T): MessageOf<T>[] =>
    Object.values(Topics)
      .flatMap((t) => bus.read(t))
      .map((r) => decodeMessage(r.value))
      .filter((d): d is { ok: true; message: RobustrlMessage } => d.ok && d.message.type === type)
      .map((d) => d.message as MessageOf<T>);
  const start = async (b: MessageBus, lastCheckpointStep: number | null = null) => {
    const executor = new RecoveryExecutor(b, store, orchestrator(), (job) => (job === jobId ? { ...initialControllerState(), lastCheckpointStep } : undefined));
    executors.push(executor);
    await executor.start();
    return executor;
  };

  beforeEach(async () => {
    msg = timeline(jobId);
    store = await EventStore.open({ kind: 'pglite' });
    bus = new InProcessBus();
    calls = [];
    executors = [];
  });
  afterEach(async () => {
    for (const e of executors) await e.stop();
    await bus.close();
    await store.close();
  });

  const replace = () =>
    msg(10, 'ReplaceMachine', { recoveryId: 'r-1', commandId: 'r-1/1', machineId: 'rollout-3', role: 'rollout', zone: 'az-1', hardwareClass: 'h100x8' });

  it('announces the isolated machine before asking for its replacement, then answers the command, once', async () => {
    await start(bus);
    const command = replace();
    await bus.publish(command);
    const answer = await eventually('answered', () => onBus('RecoveryCommandSucceeded')[0]);
    expect(answer.data).toMatchObject({ recoveryId: 'r-1', commandId: 'r-1/1', machineId: 'rollout-3', newMachineId: 'rollout-3-new' });
    expect(calls).toEqual(['isolate rollout-3 (deregistered on the bus: 0)', 'request for rollout-3 (deregistered on the bus: 1)']);
    expect(onBus('MachineDeregistered').map((m) => [m.data.machineId, m.causationId])).toEqual([['rollout-3', command.eventId]]);
    expect(await store.outbox.pending(store.dataSource.manager, RecoveryExecutor.CONSUMER)).toEqual([]);

    await bus.publish({ ...command }); // redelivered at a new offset: carried out once
    await new Promise((r) => setTimeout(r, 200));
    expect(onBus('RecoveryCommandSucceeded')).toHaveLength(1);
    expect(calls).toHaveLength(2);
  });

  it('keeps an answer the bus did not take in its outbox, and publishes it after a restart without acting again', async () => {
    // First incarnation: the bus takes the announcement, then the process dies before the answer reaches it.
    let refuse = false;
    const dying: MessageBus = Object.assign(Object.create(bus) as MessageBus, {
      publish: async (m: RobustrlMessage | readonly RobustrlMessage[]) => {
        if (refuse) throw new Error('process killed');
        if ((Array.isArray(m) ? m : [m]).some((x: RobustrlMessage) => x.type === 'MachineDeregistered')) refuse = true;
        return bus.publish(m);
      },
    });
    const first = await start(dying);
    const command = replace();
    await bus.publish(command);
    await eventually('the answer committed', async () =>
      (await store.outbox.pending(store.dataSource.manager, RecoveryExecutor.CONSUMER)).length === 1 ? true : undefined,
    );
    await first.stop();
    executors = [];
    expect(onBus('RecoveryCommandSucceeded')).toHaveLength(0);
    expect(onBus('MachineDeregistered')).toHaveLength(1);

    // Second incarnation: relays the committed answer; the command redelivered is not carried out again.
    await start(bus);
    await eventually('the answer relayed', () => onBus('RecoveryCommandSucceeded')[0]);
    await bus.publish({ ...command });
    await new Promise((r) => setTimeout(r, 200));
    expect(onBus('RecoveryCommandSucceeded')).toHaveLength(1);
    expect(calls).toHaveLength(2);
  });

  it('restarts the task and announces the job resumed from the controller’s last checkpoint and at its trainer epoch, with the job’s own settings', async () => {
    const started = msg(0, 'JobStarted', {
      mode: 'semi-sync',
      resumedFromStep: null,
      trainerMachines: 2,
      rolloutMachines: 4,
      detection: { probeTimeoutSeconds: 7 },
    });
    await store.append([started]);
    await start(bus, 41);
    const restart = msg(20, 'RestartTask', { recoveryId: 'r-2', commandId: 'r-2/1', rule: 'escalate-first-iteration', trainerEpoch: 3 });
    await bus.publish(restart);
    await eventually('answered', () => onBus('RecoveryCommandSucceeded')[0]);
    expect(calls).toEqual(['restart task']);
    const resumed = onBus('JobStarted');
    expect(resumed).toHaveLength(1);
    // Its first group starts at the task restart's trainer epoch (docs/contributors/recovery.md "Fencing").
    expect(resumed[0].data).toEqual({ ...started.data, resumedFromStep: 41, trainerEpoch: 3 });
    expect(resumed[0].causationId).toBe(restart.eventId);
    // Announced as of the command, before the machines restart (their registrations come after it), under
    // an id derived from the command: carried out again, it is the same announcement.
    expect(resumed[0].occurredAt).toBe(restart.occurredAt);
    expect(resumed[0].eventId).toBe(derivedEventId(`${restart.eventId}/JobStarted`));
    expect(derivedEventId('a')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
