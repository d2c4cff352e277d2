import { InProcessBus, MessageBus } from '@robustrl/bus';
import { decodeMessage, RobustrlMessage, Topics } from '@robustrl/contracts';
import { DecidingConsumer } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { iso, timeline } from '@robustrl/testing/job-timeline';
import { eventually } from '@robustrl/testing/eventually';
import { CONTROLLER_INPUT_TYPES, createControllerDecider } from '@robustrl/controller-domain';
import { CONTROLLER_INPUTS } from './controller.module';

/**
 * A controller killed mid-recovery resumes from the log without a duplicate restart: the real
 * decider in the real shell (inbox, outbox, checkpoints) on PGlite and the in-process bus.
 */
describe('controller killed mid-recovery', () => {
  const msg = timeline('job-crash');
  let store: EventStore;
  let bus: InProcessBus;

  beforeEach(async () => {
    store = await EventStore.open({ kind: 'pglite' });
    bus = new InProcessBus();
  });
  afterEach(async () => {
    await bus.close();
    await store.close();
  });

  const controller = (b: MessageBus) =>
    new DecidingConsumer(b, store, {
      consumer: 'controller',
      topics: CONTROLLER_INPUTS,
      inputTypes: CONTROLLER_INPUT_TYPES,
      decider: createControllerDecider(),
      tickIntervalMs: null,
    });
  const onControl = (type: string) =>
    bus
      .read(Topics.control)
      .map((r) => decodeMessage(r.value))
      .filter((d): d is { ok: true; message: RobustrlMessage } => d.ok && d.message.type === type)
      .map((d) => d.message);

  it('relays the decided restart once after the crash, ignores the redelivered verdict, and finishes the recovery', async () => {
    const history = [
      msg(0, 'JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 1 }),
      msg(0, 'MachineRegistered', { machineId: 'trainer-0', role: 'trainer', zone: 'z', hardwareClass: 'h', gpus: 8, agentAddress: 'a', dpRank: 0 }),
      msg(1, 'TrainingStepCompleted', { step: 0, batchId: 'b0', durationMs: 1 }),
      msg(2, 'CheckpointSaved', { step: 0, uri: 'file:///c0', blockingMs: 1 }),
    ];
    const fault = msg(10, 'FaultConfirmed', {
      verdictId: 'trainer-0/explicit-signal/1',
      machineId: 'trainer-0',
      role: 'trainer',
      rule: 'explicit-signal',
      handledAs: 'trainer',
      machineFaulty: false,
      detectionLatencyMs: 0,
      evidence: { signal: 'process-exited' },
    });

    // First incarnation: decides, commits, then dies before its outbox reaches the bus.
    let publishing = true;
    const crashingBus: MessageBus = Object.assign(Object.create(bus) as MessageBus, {
      publish: async (m: RobustrlMessage | readonly RobustrlMessage[]) => {
        if (!publishing) throw new Error('process killed');
        return bus.publish(m);
      },
    });
    const first = controller(crashingBus);
    await first.start();
    for (const m of history) await bus.publish(m);
    await eventually('history applied', () => (first.stateOf('job-crash')?.lastCheckpointStep === 0 ? true : undefined));
    publishing = false;
    await bus.publish(fault);
    await eventually('the decision committed', async () => {
      const rows = await store.outbox.pending(store.dataSource.manager, 'controller');
      return rows.length === 2 ? true : undefined;
    });
    await first.stop().catch(() => undefined);
    expect(onControl('RestartTrainerGroup')).toHaveLength(0);

    // Second incarnation: rebuilds from its inbox, relays what was decided, decides nothing twice.
    const second = controller(bus);
    await second.start();
    await eventually('the restart relayed', () => (onControl('RestartTrainerGroup').length === 1 ? true : undefined));
    expect(second.stateOf('job-crash')?.recoveries['trainer-0/explicit-signal/1/recovery']).toMatchObject({ action: 'restart-trainer-group', done: false });

    await bus.publish({ ...fault }); // the verdict redelivered at a new offset (same event id)
    const restart = onControl('RestartTrainerGroup')[0];
    await bus.publish(
      msg(12, 'RecoveryCommandSucceeded', {
        recoveryId: 'trainer-0/explicit-signal/1/recovery',
        commandId: (restart.data as { commandId: string }).commandId,
        machineId: 'trainer-0',
        executor: 'spec',
        durationMs: 5,
      }),
    );
    await bus.publish(msg(13, 'RolePhaseChanged', { machineId: 'trainer-0', role: 'trainer', phase: 'initializing', step: 1, changedAt: iso(13) }));
    await eventually('the recovery completed', () => (onControl('RecoveryCompleted').length === 1 ? true : undefined));
    await second.stop();

    expect(onControl('RestartTrainerGroup')).toHaveLength(1);
    expect(onControl('RecoveryDecided')).toHaveLength(1);
    expect(onControl('RecoveryCompleted')[0].data).toMatchObject({ recoveryId: 'trainer-0/explicit-signal/1/recovery', outcome: 'recovered' });
  });
});
