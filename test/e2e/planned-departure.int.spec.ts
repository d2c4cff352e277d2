import { randomBytes } from 'node:crypto';
import { createMessage, MessageOf, MessageType, RobustrlMessage } from '@robustrl/contracts';
import { LocalProcessSupervisor, MachineSpec } from '@robustrl/orchestrator';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { agentMachines } from '@robustrl/testing/agent-machines';
import { eventually } from '@robustrl/testing/eventually';
import { InProcessControlPlane, jobStarted, startInProcessControlPlane } from './in-process-control-plane';

/**
 * A planned departure end to end (docs/planned-failures.md "A trainer moves at its checkpoint"): the
 * trainer machine's agent gets SIGTERM with a 30 s grace, as a pod evicted by a drain does. Real broker,
 * database and processes; the detector and controller run in this process, the local process supervisor
 * is the orchestrator. The step in progress ends and is saved, the trainer stops there, a rollout lent as
 * warm standby begins the next step: no step is run twice, and the move is over before the grace is.
 */
jest.setTimeout(180_000);

const GRACE_SECONDS = 30;

describe('SIGTERM to the trainer machine with a 30 s grace (real Kafka, PostgreSQL, processes)', () => {
  const topicPrefix = `e2e-drain-${randomBytes(4).toString('hex')}.`;
  const brokers = (process.env.KAFKA_BROKERS ?? '').split(',');
  const jobId = `job-drain-${randomBytes(3).toString('hex')}`;
  let database: { url: string; drop(): Promise<void> };
  let supervisor: LocalProcessSupervisor;
  let plane: InProcessControlPlane;
  const seen = (): RobustrlMessage[] => plane?.seen ?? [];
  const machineOutput: string[] = [];
  const machines: MachineSpec[] = [
    { machineId: 'trainer-0', role: 'trainer', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    { machineId: 'rollout-a', role: 'rollout', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    { machineId: 'rollout-b', role: 'rollout', zone: 'az-1', hardwareClass: 'cpu-e2e' },
  ];

  const all = <T extends MessageType>(type: T, where: (m: MessageOf<T>) => boolean = () => true): MessageOf<T>[] =>
    seen().filter((m): m is MessageOf<T> => m.jobId === jobId && m.type === type && where(m as MessageOf<T>));
  async function waitFor<T extends MessageType>(type: T, what: string, where?: (m: MessageOf<T>) => boolean, timeoutMs = 45_000) {
    try {
      return await eventually(what, () => all(type, where)[0], timeoutMs);
    } catch (err) {
      const events = seen()
        .filter((m) => m.jobId === jobId)
        .map((m) => `${m.occurredAt} ${m.type} ${JSON.stringify(m.data)}`);
      process.stderr.write(`--- last machine output ---\n${machineOutput.slice(-60).join('\n')}\n--- events ---\n${events.join('\n')}\n`);
      throw err;
    }
  }

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_e2e_drain');
    supervisor = agentMachines({
      brokers,
      topicPrefix,
      databaseUrl: () => database.url,
      output: machineOutput,
      // Steps long enough that the notice lands inside one; the pod's grace period, as the chart sets it.
      env: () => ({ E2E_STEP_SECONDS: '3', ROBUSTRL_AGENT_TERMINATION_GRACE_SECONDS: String(GRACE_SECONDS) }),
    });
    process.env.ROBUSTRL_COMMAND_TIMEOUT_SECONDS = '30';
    plane = await startInProcessControlPlane({ name: 'e2e-drain-control-plane', brokers, topicPrefix, databaseUrl: database.url, orchestrator: supervisor });
    await plane.bus.publish(
      jobStarted(jobId, { trainers: 1, rollouts: 2 }, { trainerIdleWindowSeconds: 20, rolloutSilentWindowSeconds: 3, probeTimeoutSeconds: 2 }),
    );
    await supervisor.launchJob(jobId, machines);
    for (const m of machines) await waitFor('MachineRegistered', `${m.machineId} registered`, (r) => r.data.machineId === m.machineId);
  });

  afterAll(async () => {
    for (const m of (await supervisor?.listMachines(jobId)) ?? []) {
      await plane.bus.publish(
        createMessage(
          'MachineDeregistered',
          { machineId: m.machineId, reason: 'job finished' },
          { jobId, source: 'e2e', occurredAt: new Date().toISOString() },
        ),
      );
      await supervisor.isolateMachine({ operationId: `cleanup-${m.machineId}`, jobId, machineId: m.machineId, reason: 'job finished' });
    }
    await supervisor?.close();
    await plane?.stop();
    await database?.drop();
    delete process.env.ROBUSTRL_COMMAND_TIMEOUT_SECONDS;
  });

  it('the step in progress is saved, a warm standby begins the next one, no step runs twice, all before the grace ends', async () => {
    // Past the first iteration, and inside a step: the notice comes while the trainer trains.
    await waitFor('CheckpointSaved', 'checkpoint 0 saved', (m) => m.data.step === 0);
    const inStep = await waitFor('TrainingStepStarted', 'step 1 begun', (m) => m.data.step === 1);
    expect(inStep).toBeDefined();
    const agentPid = supervisor.pidOf('trainer-0')!;
    const sentAt = Date.now();
    // To the agent alone, as the kubelet signals a pod's main process; its trainer goes on meanwhile.
    process.kill(agentPid, 'SIGTERM');

    const notice = await waitFor('AgentFaultSignalled', 'the notice', (m) => m.data.machineId === 'trainer-0' && m.data.signal === 'node-draining');
    expect(notice.data.departsInMs).toBeGreaterThan((GRACE_SECONDS - 5) * 1000);
    const verdict = await waitFor('FaultConfirmed', 'the verdict', (m) => m.data.machineId === 'trainer-0');
    expect(verdict.data.evidence.departsAt).toBeDefined();
    const decided = await waitFor('RecoveryDecided', 'the decision', (m) => m.data.verdictId === verdict.data.verdictId);
    expect(decided.data).toMatchObject({ action: 'warm-standby-from-rollout', rule: 'planned-trainer-departure', handover: { status: 'waiting' } });
    const awaited = decided.data.handover!.checkpointStep;

    const saved = await waitFor(
      'RecoveryDecided',
      'the checkpoint awaited',
      (m) => m.data.recoveryId === decided.data.recoveryId && m.data.handover?.status === 'saved',
    );
    const restart = await waitFor('RestartTrainerGroup', 'the group restarted on the standby', (m) => m.data.recoveryId === decided.data.recoveryId);
    const promoted = all('PromoteRolloutToTrainer', (m) => m.data.recoveryId === decided.data.recoveryId)[0]!;
    expect(restart.data.machines).toEqual([promoted.data.rolloutMachineId]);
    // The next step, from the checkpoint of the step in progress: nothing retried.
    const savedStep = saved.data.handover!.checkpointStep;
    expect(savedStep).toBeGreaterThanOrEqual(awaited);
    expect(restart.data).toMatchObject({ step: savedStep + 1, checkpointStep: savedStep });
    const completed = await waitFor('RecoveryCompleted', 'the recovery completed', (m) => m.data.recoveryId === decided.data.recoveryId);
    expect(completed.data.outcome).toBe('recovered');
    expect(Date.parse(completed.occurredAt) - sentAt).toBeLessThan(GRACE_SECONDS * 1000);

    await waitFor('TrainingStepCompleted', 'the standby trained the next step', (m) => m.data.step === savedStep + 1);
    // No step begun or completed twice; the trainer machine stopped at its checkpoint, with no fault of its own.
    const begun = all('TrainingStepStarted').map((m) => m.data.step);
    expect(new Set(begun).size).toBe(begun.length);
    const ended = all('TrainingStepCompleted').map((m) => m.data.step);
    expect(new Set(ended).size).toBe(ended.length);
    expect(all('AgentFaultSignalled', (m) => m.data.machineId === 'trainer-0').map((m) => m.data.signal)).toEqual(['node-draining']);
    expect(all('RestartTask')).toEqual([]);
    // The machine left the pool only once the group moved: refilled as a rollout then, not at the notice.
    const refill = all('ReplaceMachine', (m) => m.data.recoveryId === decided.data.recoveryId);
    expect(refill.map((m) => [m.data.machineId, m.data.role])).toEqual([['trainer-0', 'rollout']]);
    expect(Date.parse(refill[0]!.occurredAt)).toBeGreaterThanOrEqual(Date.parse(saved.occurredAt));
  });
});
