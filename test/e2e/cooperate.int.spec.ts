import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { MessageOf } from '@robustrl/contracts';
import { MachineSpec } from '@robustrl/orchestrator';
import { eventually } from '@robustrl/testing/eventually';
import { CooperatingJob } from './fixtures/cooperating-job';

/**
 * Cooperate mode end to end on the real broker and database (docs/integrators/integrate-your-job.md): every agent
 * runs with ROBUSTRL_INTEGRATION=cooperate and starts nothing; beside it a framework process
 * (fixtures/cooperating_framework.py, robustrl.cooperate) owns the stand-in trainer or rollout worker,
 * reports its deaths and carries out the agent's commands itself. The detector and controller run here,
 * the local process supervisor is the orchestrator. The command timeout is 10 s.
 */
const FRAMEWORK = join(__dirname, 'fixtures', 'cooperating_framework.py');
const COMMAND_TIMEOUT_SECONDS = 10;

jest.setTimeout(180_000);

/** A command's exit and output, without blocking this process's event loop. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('exit', (status) => done({ status, stdout, stderr }));
  });
}

interface FrameworkEvent {
  event: string;
  machine: string;
  type?: string;
  commandId?: string;
  pid?: number;
  role?: string;
  env?: Record<string, string>;
}

describe('cooperate mode: the framework owns its processes and carries out the commands (real Kafka, PostgreSQL, processes)', () => {
  const jobId = `job-coop-${randomBytes(3).toString('hex')}`;
  const frameworkEvents: FrameworkEvent[] = [];
  const frameworks = new Map<string, ChildProcess>();
  /** Machines whose framework polls but never answers: the case the command timeout is for. */
  const ignoring = new Set(['rollout-b']);
  const job = new CooperatingJob('cooperate', jobId, {
    agentEnv: { ROBUSTRL_FRAMEWORK_ATTACHED_SECONDS: '5' },
    commandTimeoutSeconds: COMMAND_TIMEOUT_SECONDS,
    onRegistered: (m) => startFramework(m),
  });
  const all: CooperatingJob['all'] = (type, where) => job.all(type, where);
  const waitFor: CooperatingJob['waitFor'] = (type, what, where, timeoutMs) => job.waitFor(type, what, where, timeoutMs);

  const machines: MachineSpec[] = [
    { machineId: 'trainer-0', role: 'trainer', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    { machineId: 'rollout-a', role: 'rollout', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    // Another zone: never the warm standby of trainer-0.
    { machineId: 'rollout-b', role: 'rollout', zone: 'az-2', hardwareClass: 'cpu-e2e' },
  ];

  const workerOf = (machine: string) => frameworkEvents.filter((e) => e.machine === machine && e.event === 'worker-started').at(-1);

  /** A machine's framework, started once its agent registered (as a framework's launcher would, beside the agent). */
  function startFramework(registered: MessageOf<'MachineRegistered'>): void {
    const { machineId, role, agentAddress } = registered.data;
    const pid = job.supervisor.pidOf(machineId);
    if (frameworks.has(machineId) || !agentAddress || pid === undefined) return;
    const child = spawn('python3', [FRAMEWORK], {
      env: {
        ...process.env,
        ROBUSTRL_AGENT_URL: agentAddress,
        ROBUSTRL_AGENT_PID: String(pid),
        ROBUSTRL_ROLE: role,
        ROBUSTRL_MACHINE_ID: machineId,
        ROBUSTRL_JOB_ID: jobId,
        E2E_STEP_SECONDS: '1.5',
        E2E_FOLLOW: ignoring.has(machineId) ? 'ignore' : 'answer',
        PYTHONUNBUFFERED: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    frameworks.set(machineId, child);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      job.output.push(`[${machineId} framework] ${line}`);
      if (line.startsWith('{')) frameworkEvents.push(JSON.parse(line) as FrameworkEvent);
    });
    createInterface({ input: child.stderr! }).on('line', (line) => job.output.push(`[${machineId} framework] ${line}`));
  }

  beforeAll(async () => {
    await job.open();
    // Announced from Python, as a launcher without Node does (robustrl.jobs → the controller's POST /v1/jobs/:job/start).
    const controllerUrl = await job.controllerUrl();
    // Asynchronously: the controller answering it runs in this process.
    const announce = await run(
      'python3',
      [
        '-m',
        'robustrl.jobs',
        'start',
        '--controller',
        controllerUrl,
        '--job',
        jobId,
        '--trainers',
        '1',
        '--rollouts',
        '2',
        '--trainer-idle-window',
        '20',
        '--rollout-silent-window',
        '3',
        '--probe-timeout',
        '2',
      ],
      { ...process.env, PYTHONPATH: join(__dirname, '..', '..', 'clients', 'python') },
    );
    if (announce.status !== 0) throw new Error(`python -m robustrl.jobs start failed: ${announce.stderr}`);
    expect(announce.stdout).toMatch(new RegExp(`announced job ${jobId}`));
    await eventually('the job announced on the bus', () => all('JobStarted')[0]);
    expect(all('JobStarted')[0].data).toMatchObject({ trainerMachines: 1, rolloutMachines: 2, detection: { rolloutSilentWindowSeconds: 3 } });
    await job.supervisor.launchJob(jobId, machines);
    // Past the first iteration, where any fault would restart the task (paper §5.1.2 rule 1).
    await waitFor('TrainingStepCompleted', 'step 0 completed', (m) => m.data.step === 0);
    await waitFor('CheckpointSaved', 'checkpoint 0 saved', (m) => m.data.step === 0);
  });

  afterAll(() =>
    job.close(async () => {
      for (const child of frameworks.values()) child.kill('SIGKILL');
    }),
  );

  it("the framework's trainer dies → it reports the exit, receives the group restart, acknowledges and restarts the trainer itself; the recovery completes", async () => {
    const agentPid = job.supervisor.pidOf('trainer-0');
    const before = workerOf('trainer-0')!;
    const killedAt = Date.now();
    process.kill(before.pid!, 'SIGKILL');

    const signal = await waitFor('AgentFaultSignalled', 'the framework reports the exit', (m) => m.data.machineId === 'trainer-0');
    expect(signal.data).toMatchObject({ signal: 'process-exited', exitCode: 137 });
    const verdict = await waitFor('FaultConfirmed', 'trainer fault confirmed', (m) => m.data.machineId === 'trainer-0');
    const decision = await waitFor('RecoveryDecided', 'decided', (m) => m.data.verdictId === verdict.data.verdictId);
    expect(decision.data).toMatchObject({ action: 'restart-trainer-group', rule: 'trainer-fault' });
    const restart = await waitFor('RestartTrainerGroup', 'restart command', (m) => m.data.recoveryId === decision.data.recoveryId);
    const answered = await waitFor(
      'RecoveryCommandSucceeded',
      'the agent answers with the framework outcome',
      (m) => m.data.commandId === restart.data.commandId,
    );
    expect(answered.data.executor).toBe('agent/trainer-0');
    const completed = await waitFor('RecoveryCompleted', 'recovered', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(completed.data.outcome).toBe('recovered');

    // The framework did it: it received the command and started a new trainer with the group's environment.
    expect(frameworkEvents).toContainEqual(
      expect.objectContaining({ machine: 'trainer-0', event: 'command', type: 'RestartTrainerGroup', commandId: restart.data.commandId }),
    );
    const after = workerOf('trainer-0')!;
    expect(after.pid).not.toBe(before.pid);
    expect(after.env).toMatchObject({ RANK: '0', WORLD_SIZE: '1', ROBUSTRL_RETRY_STEP: String(restart.data.step) });
    // ...and the agent restarted nothing: the same agent process, no role process of its own.
    expect(job.supervisor.pidOf('trainer-0')).toBe(agentPid);
    const status = (await (
      await fetch(`${all('MachineRegistered', (m) => m.data.machineId === 'trainer-0')[0].data.agentAddress}/v1/status`)
    ).json()) as Record<string, unknown>;
    expect(status).toMatchObject({ integration: 'cooperate', framework: { attached: true, openCommands: [] } });
    expect(status.roleProcess).toBeUndefined();
    await waitFor('TrainingStepCompleted', 'training continues', (m) => m.data.step >= restart.data.step && Date.parse(m.occurredAt) > killedAt);
  });

  it('an XID error on the trainer machine → the framework hands a rollout over (promotion), then trains there as rank 0 of the re-formed group', async () => {
    // A new step first: a second trainer fault in the step of the previous one would restart the task (rule 2).
    const lastRestart = all('RestartTrainerGroup').at(-1)!;
    await waitFor('TrainingStepStarted', 'a step after the restarted one', (m) => m.data.step > lastRestart.data.step);
    const trainerAgent = all('MachineRegistered', (m) => m.data.machineId === 'trainer-0')[0].data.agentAddress!;
    const xid = await fetch(`${trainerAgent}/v1/errors`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ signal: 'xid-error', detail: 'Xid 79: GPU has fallen off the bus' }),
    });
    expect(xid.status).toBe(202);

    const verdict = await waitFor('FaultConfirmed', 'hardware fault', (m) => m.data.machineId === 'trainer-0' && m.data.machineFaulty);
    const decision = await waitFor('RecoveryDecided', 'warm standby', (m) => m.data.verdictId === verdict.data.verdictId);
    expect(decision.data).toMatchObject({ action: 'warm-standby-from-rollout' });
    const promote = await waitFor('PromoteRolloutToTrainer', 'promotion', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(promote.data.rolloutMachineId).toBe('rollout-a');
    await waitFor('MachineRoleChanged', 'rollout-a is a trainer', (m) => m.data.machineId === 'rollout-a' && m.data.to === 'trainer');
    const restart = await waitFor('RestartTrainerGroup', 'the group on the standby', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(restart.data.machines).toEqual(['rollout-a']);
    const completed = await waitFor('RecoveryCompleted', 'recovered on the standby', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(completed.data.outcome).toBe('recovered');

    const commands = frameworkEvents.filter((e) => e.machine === 'rollout-a' && e.event === 'command').map((e) => e.type);
    expect(commands).toEqual(['PromoteRolloutToTrainer', 'RestartTrainerGroup']);
    expect(workerOf('rollout-a')).toMatchObject({ role: 'trainer', env: { RANK: '0', WORLD_SIZE: '1' } });
    await waitFor('TrainingStepCompleted', 'the standby trains', (m) => Date.parse(m.occurredAt) > Date.parse(completed.occurredAt));
  });

  it("a framework that never acknowledges: the controller's command timeout fails the engine restart, and the machine is replaced", async () => {
    const worker = workerOf('rollout-b')!;
    process.kill(worker.pid!, 'SIGKILL');
    const verdict = await waitFor('FaultConfirmed', 'rollout-b fault', (m) => m.data.machineId === 'rollout-b');
    const decision = await waitFor('RecoveryDecided', 'engine restart', (m) => m.data.verdictId === verdict.data.verdictId);
    expect(decision.data.action).toBe('restart-rollout-engine');
    const restart = await waitFor('RestartRolloutEngine', 'the command', (m) => m.data.recoveryId === decision.data.recoveryId);
    const failed = await waitFor('RecoveryCommandFailed', 'timed out', (m) => m.data.commandId === restart.data.commandId, 40_000);
    expect(failed.data.error).toMatch(new RegExp(`no answer from rollout-b within ${COMMAND_TIMEOUT_SECONDS} s`));
    expect(Date.parse(failed.occurredAt) - Date.parse(restart.occurredAt)).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_SECONDS * 1000 - 1_000);
    expect(all('RecoveryCommandSucceeded', (m) => m.data.commandId === restart.data.commandId)).toEqual([]);
    const replace = await waitFor('ReplaceMachine', 'the machine replaced', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(replace.data.machineId).toBe('rollout-b');
    const completed = await waitFor('RecoveryCompleted', 'recovered by replacement', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(completed.data.outcome).toBe('recovered');
    // It never acknowledged: the command was offered and never handled.
    expect(frameworkEvents.filter((e) => e.machine === 'rollout-b' && e.event === 'command')).toEqual([]);
  });
});
