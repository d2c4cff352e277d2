import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { MessageBus, Subscription } from '@robustrl/bus';
import { createMessage, MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { signalAll, treeOf } from '@robustrl/agent';
import { ControllerModule } from '@robustrl/controller';
import { DetectorModule } from '@robustrl/detector';
import { LocalProcessSupervisor, MachineSpec } from '@robustrl/orchestrator';
import { MESSAGE_BUS, RunningService, runService } from '@robustrl/service-kit';
import { installInMemoryTracing } from '@robustrl/telemetry';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { agentMachines } from '@robustrl/testing/agent-machines';
import { eventually } from '@robustrl/testing/eventually';

/**
 * Detect → Restart end to end on the real broker and database, with real processes: an agent per
 * machine (services/agent) that runs its role process (a Python trainer or rollout script talking to
 * it through clients/python), the detector and controller in this process, and the local process
 * supervisor as the orchestrator. Windows are scaled to seconds through the job's detection settings.
 */
const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'cli', 'bin', 'robustrl.js');

jest.setTimeout(180_000);

describe('detect and restart, end to end (real Kafka, PostgreSQL, processes)', () => {
  const tracing = installInMemoryTracing();
  const topicPrefix = `e2e-${randomBytes(4).toString('hex')}.`;
  const brokers = (process.env.KAFKA_BROKERS ?? '').split(',');
  let database: { url: string; drop(): Promise<void> };
  let dbUrl: string;
  let supervisor: LocalProcessSupervisor;
  let service: RunningService;
  let observer: Subscription;
  let bus: MessageBus;
  const seen: RobustrlMessage[] = [];
  const machineOutput: string[] = [];

  const ofJob = (jobId: string) => seen.filter((m) => m.jobId === jobId);
  function find<T extends MessageType>(jobId: string, type: T, where: (m: MessageOf<T>) => boolean = () => true): MessageOf<T> | undefined {
    return ofJob(jobId).find((m): m is MessageOf<T> => m.type === type && where(m as MessageOf<T>));
  }
  function all<T extends MessageType>(jobId: string, type: T, where: (m: MessageOf<T>) => boolean = () => true): MessageOf<T>[] {
    return ofJob(jobId).filter((m): m is MessageOf<T> => m.type === type && where(m as MessageOf<T>));
  }
  async function waitFor<T extends MessageType>(jobId: string, type: T, what: string, where?: (m: MessageOf<T>) => boolean, timeoutMs = 45_000) {
    try {
      return await eventually(what, () => find(jobId, type, where), timeoutMs);
    } catch (err) {
      process.stderr.write(
        `--- last machine output ---\n${machineOutput.slice(-60).join('\n')}\n--- ${jobId} events ---\n${ofJob(jobId)
          .map((m) => `${m.occurredAt} ${m.type} ${JSON.stringify(m.data)}`)
          .join('\n')}\n`,
      );
      throw err;
    }
  }
  async function startJob(jobId: string, machines: MachineSpec[], stepSeconds: number) {
    stepSecondsOf.set(jobId, stepSeconds);
    await bus.publish(
      createMessage(
        'JobStarted',
        {
          mode: 'semi-sync',
          resumedFromStep: null,
          trainerMachines: machines.filter((m) => m.role === 'trainer').length,
          rolloutMachines: machines.filter((m) => m.role === 'rollout').length,
          // Paper windows (300 s / 60 s) scaled to seconds for the test.
          detection: { trainerIdleWindowSeconds: 20, rolloutSilentWindowSeconds: 3, probeTimeoutSeconds: 2 },
        },
        { jobId, source: 'e2e', occurredAt: new Date().toISOString() },
      ),
    );
    await supervisor.launchJob(jobId, machines);
    for (const m of machines) await waitFor(jobId, 'MachineRegistered', `${m.machineId} registered`, (r) => r.data.machineId === m.machineId);
  }
  const stepSecondsOf = new Map<string, number>();
  const agentUrl = (jobId: string, machineId: string) => all(jobId, 'MachineRegistered', (m) => m.data.machineId === machineId).at(-1)!.data.agentAddress;

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_e2e');
    dbUrl = database.url;

    supervisor = agentMachines({
      brokers,
      topicPrefix,
      databaseUrl: () => dbUrl,
      output: machineOutput,
      env: (m) => ({ E2E_STEP_SECONDS: String(stepSecondsOf.get(m.jobId) ?? 1.5) }),
    });
    process.env.ROBUSTRL_COMMAND_TIMEOUT_SECONDS = '30';
    service = await runService(
      {
        serviceName: 'e2e-control-plane',
        bus: { adapter: 'kafka', brokers, clientId: 'e2e-control-plane', topicPrefix },
        store: { kind: 'postgres', url: dbUrl },
        httpPort: 0,
      },
      [DetectorModule, ControllerModule.withOrchestrator(supervisor)],
      { logLevels: ['error'] },
    );
    bus = service.app.get<MessageBus>(MESSAGE_BUS);
    observer = await bus.subscribe({ groupId: 'e2e-observer', topics: Object.values(Topics), handler: async (d) => void seen.push(d.message) });
  });

  afterAll(async () => {
    // What each recovery cost on this machine, for docs/benchmarks.md (observed, not asserted).
    const decisions = new Map(seen.filter((m): m is MessageOf<'RecoveryDecided'> => m.type === 'RecoveryDecided').map((m) => [m.data.recoveryId, m.data]));
    const rows = seen
      .filter((m): m is MessageOf<'RecoveryCompleted'> => m.type === 'RecoveryCompleted')
      .map((m) => {
        const d = decisions.get(m.data.recoveryId);
        const s = m.data.stagesMs;
        return `  ${(d?.action ?? '?').padEnd(26)} ${m.data.outcome.padEnd(10)} detect ${String(s.detect).padStart(5)} ms  decide ${String(s.decide).padStart(4)} ms  restart ${String(s.restart).padStart(5)} ms  reconnect ${String(s.reconnect).padStart(5)} ms`;
      });
    process.stdout.write(`recoveries observed in the end-to-end test:\n${rows.join('\n')}\n`);
    await observer?.close();
    await supervisor?.close();
    await service?.stop();
    await database?.drop();
    delete process.env.ROBUSTRL_COMMAND_TIMEOUT_SECONDS;
  });

  describe('a semi-sync job: one trainer, three rollouts', () => {
    const jobId = `job-a-${randomBytes(3).toString('hex')}`;
    const machines: MachineSpec[] = [
      { machineId: 'trainer-0', role: 'trainer', zone: 'az-1', hardwareClass: 'cpu-e2e' },
      { machineId: 'rollout-a', role: 'rollout', zone: 'az-1', hardwareClass: 'cpu-e2e' },
      { machineId: 'rollout-b', role: 'rollout', zone: 'az-1', hardwareClass: 'cpu-e2e' },
      { machineId: 'rollout-c', role: 'rollout', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    ];

    beforeAll(async () => {
      await startJob(jobId, machines, 1.5);
      // Past the first iteration, where any fault would restart the task (paper §5.1.2 rule 1).
      await waitFor(jobId, 'TrainingStepCompleted', 'step 0 completed', (m) => m.data.step === 0);
      await waitFor(jobId, 'CheckpointSaved', 'checkpoint 0 saved', (m) => m.data.step === 0);
    });

    it('kill -9 a rollout machine → confirmed through the probe, replaced, the job continues', async () => {
      const killedAt = Date.now();
      supervisor.killMachine('rollout-b', 'SIGKILL'); // the machine is gone: its agent and the rollout process with it

      const verdict = await waitFor(jobId, 'FaultConfirmed', 'rollout-b confirmed', (m) => m.data.machineId === 'rollout-b');
      expect(verdict.data).toMatchObject({ rule: 'rollout-silent', handledAs: 'rollout', evidence: { probe: { result: 'timed-out' } } });
      expect(find(jobId, 'FaultSuspected', (m) => m.data.machineId === 'rollout-b')).toBeDefined();
      expect(find(jobId, 'HeartbeatProbeRequested', (m) => m.data.machineId === 'rollout-b')).toBeDefined();
      // Window (3 s) + probe timeout (2 s) + a sampling interval and a tick of slack.
      expect(Date.parse(verdict.occurredAt) - killedAt).toBeLessThan(3_000 + 2_000 + 3_000);

      const decision = await waitFor(jobId, 'RecoveryDecided', 'replacement decided', (m) => m.data.verdictId === verdict.data.verdictId);
      expect(decision.data).toMatchObject({ action: 'replace-rollout', rule: 'rollout-fault' });
      await waitFor(jobId, 'MachineDeregistered', 'rollout-b isolated', (m) => m.data.machineId === 'rollout-b');
      const replaced = await waitFor(jobId, 'RecoveryCommandSucceeded', 'replacement machine started', (m) => m.data.recoveryId === decision.data.recoveryId);
      const newMachine = replaced.data.newMachineId!;
      expect(newMachine).toMatch(/^rollout-/);
      await waitFor(jobId, 'RolloutThroughputSampled', 'the new rollout generating', (m) => m.data.machineId === newMachine);
      const completed = await waitFor(jobId, 'RecoveryCompleted', 'recovery completed', (m) => m.data.recoveryId === decision.data.recoveryId);
      expect(completed.data.outcome).toBe('recovered');

      // Only that machine: no task restart, no trainer restart, and the trainer kept training.
      expect(all(jobId, 'RestartTask')).toEqual([]);
      expect(all(jobId, 'RestartTrainerGroup')).toEqual([]);
      const stepsAfter = all(jobId, 'TrainingStepCompleted', (m) => Date.parse(m.occurredAt) > killedAt);
      expect(stepsAfter.length).toBeGreaterThan(0);
    });

    it('kill -9 the trainer process → only the trainer group restarts, rollouts keep reporting throughput', async () => {
      const rolloutPids = ['rollout-a', 'rollout-c'].map((id) => supervisor.pidOf(id));
      const status = (await (await fetch(`${agentUrl(jobId, 'trainer-0')}/v1/status`)).json()) as { roleProcess: { pid: number } };
      const killedAt = Date.now();
      signalAll(treeOf(status.roleProcess.pid), 'SIGKILL'); // the trainer's whole process tree

      const signal = await waitFor(
        jobId,
        'AgentFaultSignalled',
        'the agent reports the exit',
        (m) => m.data.machineId === 'trainer-0' && Date.parse(m.occurredAt) >= killedAt,
      );
      expect(signal.data).toMatchObject({ signal: 'process-exited', exitCode: 137 });
      const verdict = await waitFor(jobId, 'FaultConfirmed', 'trainer fault confirmed', (m) => m.data.machineId === 'trainer-0');
      expect(verdict.data).toMatchObject({ rule: 'explicit-signal', handledAs: 'trainer', machineFaulty: false });
      const decision = await waitFor(jobId, 'RecoveryDecided', 'trainer restart decided', (m) => m.data.verdictId === verdict.data.verdictId);
      expect(decision.data).toMatchObject({ action: 'restart-trainer-group', rule: 'trainer-fault' });
      const restart = await waitFor(jobId, 'RestartTrainerGroup', 'restart command', (m) => m.data.recoveryId === decision.data.recoveryId);
      expect(restart.data).toMatchObject({ machines: ['trainer-0'], keepBatch: true });
      expect(restart.data.checkpointStep).not.toBeNull();
      const completed = await waitFor(jobId, 'RecoveryCompleted', 'trainer recovery completed', (m) => m.data.recoveryId === decision.data.recoveryId);
      expect(completed.data.outcome).toBe('recovered');

      // The restarted trainer retried the kept step from the reloaded checkpoint...
      await waitFor(
        jobId,
        'RolePhaseChanged',
        'restarted trainer initialising at the retried step',
        (m) => m.data.machineId === 'trainer-0' && m.data.phase === 'initializing' && m.data.step === restart.data.step && Date.parse(m.occurredAt) > killedAt,
      );
      const resumed = await waitFor(
        jobId,
        'TrainingStepCompleted',
        'training continues after the restart',
        (m) => m.data.step === restart.data.step && Date.parse(m.occurredAt) > Date.parse(completed.occurredAt),
      );
      // ...while the rollouts were never touched and kept generating through the restart.
      expect(['rollout-a', 'rollout-c'].map((id) => supervisor.pidOf(id))).toEqual(rolloutPids);
      const during = (id: string) =>
        all(
          jobId,
          'RolloutThroughputSampled',
          (m) =>
            m.data.machineId === id &&
            m.data.tokensPerSecond > 0 &&
            Date.parse(m.occurredAt) > killedAt &&
            Date.parse(m.occurredAt) < Date.parse(resumed.occurredAt),
        );
      for (const id of ['rollout-a', 'rollout-c'])
        expect({ id, generatedWhileTrainerWasDown: during(id).length > 0 }).toEqual({ id, generatedWhileTrainerWasDown: true });
      expect(all(jobId, 'RestartTask')).toEqual([]);
      expect(all(jobId, 'ReplaceMachine', (m) => m.data.recoveryId === decision.data.recoveryId)).toEqual([]);
    });

    it('an XID error on the trainer machine → a rollout becomes the trainer (warm standby), the faulty machine is replaced as a rollout', async () => {
      // A new step first: a second trainer fault in the step of the previous one would restart the task (rule 2).
      const lastRestart = all(jobId, 'RestartTrainerGroup').at(-1)!;
      await waitFor(jobId, 'TrainingStepStarted', 'a step after the restarted one', (m) => m.data.step > lastRestart.data.step);
      const response = await fetch(`${agentUrl(jobId, 'trainer-0')}/v1/errors`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ signal: 'xid-error', detail: 'Xid 79: GPU has fallen off the bus' }),
      });
      expect(response.status).toBe(202);

      const verdict = await waitFor(jobId, 'FaultConfirmed', 'hardware fault confirmed', (m) => m.data.machineId === 'trainer-0' && m.data.machineFaulty);
      const decision = await waitFor(jobId, 'RecoveryDecided', 'warm standby decided', (m) => m.data.verdictId === verdict.data.verdictId);
      expect(decision.data).toMatchObject({ action: 'warm-standby-from-rollout', rule: 'trainer-machine-faulty' });
      const promote = await waitFor(jobId, 'PromoteRolloutToTrainer', 'a rollout promoted', (m) => m.data.recoveryId === decision.data.recoveryId);
      const standby = promote.data.rolloutMachineId;
      expect(standby).toMatch(/^rollout-/);
      await waitFor(jobId, 'MachineRoleChanged', 'the standby switched roles', (m) => m.data.machineId === standby && m.data.to === 'trainer');
      const refill = await waitFor(
        jobId,
        'ReplaceMachine',
        'the faulty machine replaced for the rollout pool',
        (m) => m.data.recoveryId === decision.data.recoveryId,
      );
      expect(refill.data).toMatchObject({ machineId: 'trainer-0', role: 'rollout' });
      const restart = await waitFor(
        jobId,
        'RestartTrainerGroup',
        'the trainer group restarted on the standby',
        (m) => m.data.recoveryId === decision.data.recoveryId,
      );
      expect(restart.data.machines).toEqual([standby]);
      const completed = await waitFor(jobId, 'RecoveryCompleted', 'warm standby recovery completed', (m) => m.data.recoveryId === decision.data.recoveryId);
      expect(completed.data.outcome).toBe('recovered');
      await waitFor(jobId, 'TrainingStepCompleted', 'the standby trains', (m) => Date.parse(m.occurredAt) > Date.parse(completed.occurredAt));
      const refilled = await waitFor(
        jobId,
        'RecoveryCommandSucceeded',
        'a new rollout machine for the pool',
        (m) => m.data.commandId === refill.data.commandId,
      );
      await waitFor(jobId, 'RolloutThroughputSampled', 'the refill generating', (m) => m.data.machineId === refilled.data.newMachineId);
      expect(all(jobId, 'RestartTask')).toEqual([]);
    });

    it('one trace per fault: evidence → verdict → decision → role restarted, and a latency histogram in Prometheus format', async () => {
      const spans = tracing.spans();
      const verdictSend = spans.find(
        (s) =>
          s.name === 'send FaultConfirmed' &&
          s.attributes['robustrl.job_id'] === jobId &&
          spans.some((p) => p.spanContext().traceId === s.spanContext().traceId && p.name === 'process AgentFaultSignalled'),
      );
      expect(verdictSend).toBeDefined();
      const trace = spans.filter((s) => s.spanContext().traceId === verdictSend!.spanContext().traceId).map((s) => s.name);
      // Evidence (the agent's signal, consumed here), verdict, decision, and the agent's answer to the restart.
      expect(trace).toEqual(
        expect.arrayContaining([
          'process AgentFaultSignalled',
          'decide detector',
          'send FaultConfirmed',
          'process FaultConfirmed',
          'decide controller',
          'send RecoveryDecided',
          'send RestartTrainerGroup',
          'process RecoveryCommandSucceeded',
        ]),
      );
      // A verdict reached by time alone (the silent rollout) starts its trace with the evidence window.
      const evidence = spans.find((s) => s.name === 'evidence rollout-silent');
      expect(evidence).toBeDefined();
      const silentTrace = spans.filter((s) => s.spanContext().traceId === evidence!.spanContext().traceId).map((s) => s.name);
      expect(silentTrace).toEqual(
        expect.arrayContaining([
          'evidence rollout-silent',
          'send FaultConfirmed',
          'process FaultConfirmed',
          'send ReplaceMachine',
          'execute ReplaceMachine',
          'send RecoveryCommandSucceeded',
        ]),
      );

      const metrics = await (await fetch(`${(await service.app.getUrl()).replace('[::1]', '127.0.0.1')}/metrics`)).text();
      expect(metrics).toMatch(/# TYPE robustrl_recovery_stage_seconds histogram/);
      expect(metrics).toMatch(/robustrl_recovery_stage_seconds_count\{stage="restart",outcome="recovered"\} [2-9]/);
      expect(metrics).toMatch(/robustrl_recovery_decisions_total\{action="replace-rollout",rule="rollout-fault"\} 1/);
    });

    it('robustrl tail shows the whole story', () => {
      // Topics are ordered per job but read side by side: ask for exactly as many records as the story has.
      const story = ofJob(jobId).filter(
        (m) =>
          m.type in { FaultSuspected: 1, FaultConfirmed: 1, SuspicionCleared: 1 } ||
          [
            'RecoveryDecided',
            'RestartTrainerGroup',
            'PromoteRolloutToTrainer',
            'ReplaceMachine',
            'RestartTask',
            'RecoveryCommandSucceeded',
            'RecoveryCommandFailed',
            'RecoveryCompleted',
          ].includes(m.type),
      );
      const out = execFileSync(
        process.execPath,
        [
          CLI,
          'tail',
          '--job',
          jobId,
          '--from-beginning',
          '--topic',
          'verdicts',
          'control',
          'replies',
          '--limit',
          String(story.length),
          '--topic-prefix',
          topicPrefix,
        ],
        {
          encoding: 'utf8',
          env: { ...process.env, KAFKA_BROKERS: brokers.join(',') },
          timeout: 60_000,
        },
      );
      expect(out).toMatch(/FaultConfirmed .*machineId=rollout-b .*rule=rollout-silent/);
      expect(out).toMatch(/RecoveryDecided .*action=replace-rollout/);
      expect(out).toMatch(/ReplaceMachine .*machineId=rollout-b/);
      expect(out).toMatch(/FaultConfirmed .*machineId=trainer-0 .*rule=explicit-signal/);
      expect(out).toMatch(/RestartTrainerGroup .*machines=\[1\] .*keepBatch=true/);
      expect(out).toMatch(/PromoteRolloutToTrainer .*replacesMachineId=trainer-0/);
      expect(out.match(/RecoveryCompleted .*outcome=recovered/g)).toHaveLength(3);
    });

    afterAll(async () => {
      // The job is over: its machines leave first, so the control plane does not replace them.
      for (const m of await supervisor.listMachines(jobId)) {
        await bus.publish(
          createMessage(
            'MachineDeregistered',
            { machineId: m.machineId, reason: 'job finished' },
            { jobId, source: 'e2e', occurredAt: new Date().toISOString() },
          ),
        );
      }
      await eventually('the detector to let the machines go', () =>
        seen.filter((m) => m.jobId === jobId && m.type === 'MachineDeregistered' && m.source === 'e2e').length > 0 ? true : undefined,
      );
      for (const m of await supervisor.listMachines(jobId)) {
        await supervisor.isolateMachine({ operationId: `cleanup-${m.machineId}`, jobId, machineId: m.machineId, reason: 'job finished' });
      }
    });
  });

  describe('a job failing in its first iteration', () => {
    const jobId = `job-b-${randomBytes(3).toString('hex')}`;

    it('three faults in the first iteration (trainer exit, step exception, rollout exit) → three task restarts, never a role restart', async () => {
      // A long first step: every fault lands inside it.
      await startJob(
        jobId,
        [
          { machineId: 'b-trainer-0', role: 'trainer', zone: 'az-1', hardwareClass: 'cpu-e2e' },
          { machineId: 'b-rollout-0', role: 'rollout', zone: 'az-1', hardwareClass: 'cpu-e2e' },
        ],
        120,
      );
      const roleProcessOf = async (address: string) =>
        ((await (await fetch(`${address}/v1/status`)).json()) as { roleProcess: { pid: number } }).roleProcess.pid;
      const faults: Array<{ kind: string; inject: (trainer: string, rollout: string) => Promise<void> }> = [
        { kind: 'trainer process killed', inject: async (trainer) => signalAll(treeOf(await roleProcessOf(trainer)), 'SIGKILL') },
        {
          kind: 'exception in the training step',
          inject: async (trainer) => {
            const r = await fetch(`${trainer}/v1/errors`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ signal: 'step-exception', detail: 'RuntimeError: shape mismatch in loss' }),
            });
            expect(r.status).toBe(202);
          },
        },
        // Code errors in rollout escalate too in the first iteration (paper §5.1.2, footnote 2).
        { kind: 'rollout process killed', inject: async (_trainer, rollout) => signalAll(treeOf(await roleProcessOf(rollout)), 'SIGKILL') },
      ];
      for (const [i, fault] of faults.entries()) {
        // The machines of this incarnation of the task: registered after the last task restart, the trainer training.
        const since = i === 0 ? 0 : Date.parse(all(jobId, 'RestartTask')[i - 1].occurredAt);
        const registered = (machineId: string) =>
          waitFor(jobId, 'MachineRegistered', `${machineId} up (fault ${i + 1})`, (m) => m.data.machineId === machineId && Date.parse(m.occurredAt) > since);
        const trainer = await registered('b-trainer-0');
        const rollout = await registered('b-rollout-0');
        await waitFor(
          jobId,
          'RolePhaseChanged',
          `trainer training (fault ${i + 1})`,
          (m) => m.data.machineId === 'b-trainer-0' && m.data.phase === 'training' && Date.parse(m.occurredAt) > Date.parse(trainer.occurredAt),
        );
        await fault.inject(trainer.data.agentAddress, rollout.data.agentAddress);

        const decision = await waitFor(
          jobId,
          'RecoveryDecided',
          `task restart #${i + 1} decided (${fault.kind})`,
          (m) => m.data.action === 'restart-task' && all(jobId, 'RecoveryDecided', (d) => d.data.action === 'restart-task').indexOf(m) === i,
        );
        expect({ fault: fault.kind, rule: decision.data.rule }).toEqual({ fault: fault.kind, rule: 'escalate-first-iteration' });
        await waitFor(jobId, 'RecoveryCompleted', `task restart #${i + 1} done`, (m) => m.data.recoveryId === decision.data.recoveryId);
        // The restarted task announces itself: a new first iteration.
        await waitFor(jobId, 'JobStarted', `job restarted #${i + 1}`, () => all(jobId, 'JobStarted').length === i + 2);
      }
      expect(all(jobId, 'RestartTask').map((m) => m.data.rule)).toEqual(['escalate-first-iteration', 'escalate-first-iteration', 'escalate-first-iteration']);
      expect(all(jobId, 'RestartTrainerGroup')).toEqual([]);
      expect(all(jobId, 'ReplaceMachine')).toEqual([]);
    });
  });
});
