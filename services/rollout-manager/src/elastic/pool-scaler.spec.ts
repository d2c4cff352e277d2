import { InProcessBus } from '@robustrl/bus';
import { createMessage, DataOf, decodeMessage, MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { LocalProcessSupervisor } from '@robustrl/orchestrator';
import { DecidingConsumer } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { ensureContextManager, installInMemoryTracing } from '@robustrl/telemetry';
import { eventually } from '@robustrl/testing/eventually';
import { createRolloutPoolDecider, ROLLOUT_POOL_INPUT_TYPES, Trajectories } from '@robustrl/rollout-manager-domain';
import { ROLLOUT_MANAGER_INPUTS } from '../rollout-manager.module';
import { PoolScaler } from './pool-scaler';

// As the rollout manager's process runs (main.ts): trace context within synchronous calls only.
ensureContextManager('synchronous');
const tracing = installInMemoryTracing();

/**
 * The elastic pool end to end in one process: the pool decider in its shell, the scaler, and the
 * local process supervisor running real (idle) processes as the rollout machines.
 */
describe('elastic rollout pool', () => {
  const jobId = 'job-elastic';
  let bus: InProcessBus;
  let store: EventStore;
  let supervisor: LocalProcessSupervisor;
  let pool: DecidingConsumer<ReturnType<ReturnType<typeof createRolloutPoolDecider>['initialState']>>;
  let scaler: PoolScaler;

  const publish = <T extends MessageType>(type: T, data: DataOf<T>) =>
    bus.publish(createMessage(type, data, { jobId, source: 'spec', occurredAt: new Date().toISOString() }) as RobustrlMessage);
  const onBus = <T extends MessageType>(type: T): MessageOf<T>[] =>
    Object.values(Topics)
      .flatMap((t) => bus.read(t))
      .map((r) => decodeMessage(r.value))
      .filter((d): d is { ok: true; message: RobustrlMessage } => d.ok && d.message.type === type)
      .map((d) => d.message as MessageOf<T>);

  beforeEach(async () => {
    bus = new InProcessBus();
    store = await EventStore.open({ kind: 'pglite' });
    supervisor = new LocalProcessSupervisor({
      stopGraceMs: 1_000,
      output: () => undefined,
      launch: () => ({ command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] }),
    });
    pool = new DecidingConsumer(bus, store, {
      consumer: 'rollout-manager',
      topics: ROLLOUT_MANAGER_INPUTS,
      inputTypes: ROLLOUT_POOL_INPUT_TYPES,
      decider: createRolloutPoolDecider(),
      tickIntervalMs: null,
    });
    await pool.start();
    scaler = new PoolScaler(bus, store, supervisor, (job) => pool.stateOf(job));
    await scaler.start();
    // Three rollout machines serving, r-0 with two trajectories in flight, r-2 with one.
    const machines = ['r-0', 'r-1', 'r-2'].map((machineId) => ({ machineId, role: 'rollout' as const, zone: 'az-1', hardwareClass: 'h100x8' }));
    await supervisor.launchJob(jobId, machines);
    for (const m of machines) await publish('MachineRegistered', { ...m, gpus: 8, agentAddress: `${m.machineId}:8086`, dpRank: 0 });
    let n = 0;
    for (const [trajectoryId, rolloutId] of [
      ['a', 'r-0'],
      ['b', 'r-0'],
      ['c', 'r-2'],
    ]) {
      await publish('TrajectoryTurnAppended', {
        trajectoryId,
        batchId: 'b',
        step: 1,
        promptId: trajectoryId,
        sampleIndex: 0,
        turnId: `${trajectoryId}#${++n}`,
        turnIndex: 0,
        kind: 'model-output',
        rolloutId,
        weightVersion: 1,
        tokens: 10,
      });
    }
    await eventually('the pool sees three machines and three trajectories', () => {
      const s = pool.stateOf(jobId);
      return s && Object.keys(s.machines).length === 3 && Trajectories.count(s.trajectories) === 3 ? true : undefined;
    });
  });

  afterEach(async () => {
    await scaler.stop();
    await pool.stop();
    await supervisor.close();
    await bus.close();
    await store.close();
  });

  it('scales down by releasing the least busy machines, after their trajectories moved to the one that stays', async () => {
    const command = createMessage(
      'ScaleRolloutPool',
      { commandId: 'scale-1', targetMachines: 1, zone: 'az-1', hardwareClass: 'h100x8', reason: 'batch tail' },
      { jobId, source: 'spec', occurredAt: new Date().toISOString() },
    );
    await bus.publish(command);
    const scaled = await eventually('scaled', () => onBus('RolloutPoolScaled')[0]);
    expect(scaled.data).toMatchObject({ commandId: 'scale-1', from: 3, to: 1, added: [], removed: ['r-1', 'r-2'] });
    expect((await supervisor.listMachines(jobId)).map((m) => m.machineId)).toEqual(['r-0']);
    // r-2's trajectory continues on r-0, from the turn after its last stored one.
    const moved = await eventually('reassigned', () => onBus('TrajectoriesReassigned')[0]);
    expect(moved.data).toMatchObject({ fromRolloutId: 'r-2', assignments: [{ trajectoryId: 'c', toRolloutId: 'r-0', resumeFromTurn: 1 }] });
    expect(onBus('MachineDeregistered').map((m) => m.data.machineId)).toEqual(['r-1', 'r-2']);

    await bus.publish({ ...command }); // redelivered: carried out once
    await new Promise((r) => setTimeout(r, 300));
    expect(onBus('RolloutPoolScaled')).toHaveLength(1);
  });

  it("keeps the command's outcome and the moves it causes in the command's trace, with synchronous trace context", async () => {
    tracing.reset();
    await publish('ScaleRolloutPool', { commandId: 'scale-3', targetMachines: 1, zone: 'az-1', hardwareClass: 'h100x8', reason: 'batch tail' });
    const scaled = await eventually('scaled', () => onBus('RolloutPoolScaled')[0]);
    const moved = await eventually('reassigned', () => onBus('TrajectoriesReassigned')[0]);
    const send = tracing.spans().find((s) => s.name === 'send ScaleRolloutPool');
    expect(send).toBeDefined();
    const traceId = send!.spanContext().traceId;
    // The executor's outcome is published long after the command's handler awaited the orchestrator and the store.
    expect(scaled.trace?.traceparent).toContain(traceId);
    // The pool decided the moves on the scaler's MachineDeregistered: one trace from the command to the moves.
    expect(moved.trace?.traceparent).toContain(traceId);
  });

  it('scales up by asking the orchestrator for new machines', async () => {
    await publish('ScaleRolloutPool', { commandId: 'scale-2', targetMachines: 5, zone: 'az-1', hardwareClass: 'h100x8', reason: 'new batch' });
    const scaled = await eventually('scaled', () => onBus('RolloutPoolScaled')[0]);
    expect(scaled.data).toMatchObject({ from: 3, to: 5, removed: [] });
    expect(scaled.data.added).toHaveLength(2);
    const running = (await supervisor.listMachines(jobId)).map((m) => m.machineId);
    for (const id of scaled.data.added) expect(running).toContain(id);
  });
});
