import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { InProcessBus } from '@robustrl/bus';
import { createMessage, decodeMessage, MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { eventually } from '@robustrl/testing/eventually';
import { AgentApiController } from './agent-api.controller';
import { agentConfigFromEnv } from './agent-config';
import { AgentRuntime } from './agent-runtime';
import { signalAll, treeOf } from './process-tree';

/** The agent against the in-process bus, with real role processes (small shell scripts). */
describe('agent', () => {
  let bus: InProcessBus;
  let runtime: AgentRuntime;
  let app: INestApplication;
  let url: string;
  let dir: string;

  const published = (type: MessageType) =>
    Object.values(Topics)
      .flatMap((t) => bus.read(t))
      .map((r) => decodeMessage(r.value))
      .filter((d): d is { ok: true; message: RobustrlMessage } => d.ok && d.message.type === type)
      .map((d) => d.message);
  const role = (name: string) =>
    `echo "$ROBUSTRL_ROLE retry=$ROBUSTRL_RETRY_STEP ckpt=$ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP${name === 'trainer' ? ' rank=$RANK/$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT batch=$ROBUSTRL_BATCH_ID' : ''}" > ${dir}/${name}-$$; exec sleep 60`;
  const starts = (name: string) =>
    readdirSync(dir)
      .filter((f) => f.startsWith(`${name}-`))
      .map((f) => readFileSync(join(dir, f), 'utf8').trim());
  const command = <T extends MessageType>(type: T, data: MessageOf<T>['data']) =>
    createMessage(type, data, { jobId: 'job-1', source: 'controller', occurredAt: new Date().toISOString() });

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'robustrl-agent-'));
    bus = new InProcessBus();
    const config = agentConfigFromEnv({
      ROBUSTRL_JOB_ID: 'job-1',
      ROBUSTRL_MACHINE_ID: 'm-1',
      ROBUSTRL_ROLE: 'rollout',
      ROBUSTRL_GPU_SOURCE: 'emulated',
      ROBUSTRL_ROLLOUT_COMMAND: role('rollout'),
      ROBUSTRL_TRAINER_COMMAND: role('trainer'),
      ROBUSTRL_STOP_GRACE_SECONDS: '1',
      ROBUSTRL_GPU_SAMPLE_SECONDS: '3600',
      ROBUSTRL_WEIGHTS_PORT: '0',
      ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
      ROBUSTRL_INFERENCE_URL: 'http://10.0.0.5:8000',
    });
    runtime = new AgentRuntime(bus, config);
    const moduleRef = await Test.createTestingModule({
      controllers: [AgentApiController],
      providers: [{ provide: AgentRuntime, useValue: runtime }],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    await runtime.start(url);
    await eventually('role process started', () => (starts('rollout').length === 1 ? true : undefined));
  });

  afterEach(async () => {
    await runtime.stop();
    await app.close();
    await bus.close();
  });

  it('refuses a configuration without a machine id, naming it', () => {
    expect(() => agentConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROLE: 'trainer' })).toThrow(/ROBUSTRL_MACHINE_ID/);
    expect(() => agentConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_MACHINE_ID: 'm', ROBUSTRL_ROLE: 'pilot' })).toThrow(/ROBUSTRL_ROLE/);
    expect(() =>
      agentConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_MACHINE_ID: 'm', ROBUSTRL_ROLE: 'rollout', ROBUSTRL_INFERENCE_URL: '10.0.0.5:8000' }),
    ).toThrow(/ROBUSTRL_INFERENCE_URL/);
  });

  it("registers the machine and relays the framework's reports; a bad body is a 400 naming each problem", async () => {
    // The engine's URL travels with the registration: the router routes to it once the machine holds weights.
    expect(published('MachineRegistered')[0].data).toMatchObject({
      machineId: 'm-1',
      role: 'rollout',
      agentAddress: url,
      inferenceUrl: 'http://10.0.0.5:8000',
    });
    const bad = await fetch(`${url}/v1/phase`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ phase: 'napping', step: -1 }),
    });
    expect(bad.status).toBe(400);
    const problems = (await bad.json()) as { issues: Array<{ path: string }> };
    expect(problems.issues.map((i) => i.path).sort()).toEqual(['phase', 'step']);
    expect(published('RolePhaseChanged')).toHaveLength(0);

    const ok = await fetch(`${url}/v1/phase`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ phase: 'rollout', step: 3 }),
    });
    expect(ok.status).toBe(202);
    const { eventId } = (await ok.json()) as { eventId: string };
    expect(published('RolePhaseChanged')).toEqual([
      expect.objectContaining({ eventId, data: expect.objectContaining({ machineId: 'm-1', phase: 'rollout', step: 3 }) }),
    ]);
    const tput = await fetch(`${url}/v1/throughput`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ windowSeconds: 10, tokensPerSecond: 5, completedRequests: 1, inFlightRequests: 2, awaitingTools: 1 }),
    });
    expect(tput.status).toBe(202);
    expect(published('RolloutThroughputSampled')[0].data).toMatchObject({ machineId: 'm-1', rolloutId: 'm-1', awaitingTools: 1 });

    // A drain notice with its time left; a negative one is refused, naming the field.
    const post = (body: object) => fetch(`${url}/v1/errors`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const refused = await post({ signal: 'node-draining', detail: 'preempted', departsInSeconds: -5 });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { issues: Array<{ path: string }> }).issues.map((i) => i.path)).toEqual(['departsInSeconds']);
    expect((await post({ signal: 'node-draining', detail: 'preempted', departsInSeconds: 29.5 })).status).toBe(202);
    expect(published('AgentFaultSignalled').map((m) => m.data)).toEqual([expect.objectContaining({ signal: 'node-draining', departsInMs: 29_500 })]);
  });

  it('answers probes while its role process lives; reports the process exit and stops answering', async () => {
    await bus.publish(command('HeartbeatProbeRequested', { probeId: 'p-1', machineId: 'm-1', timeoutMs: 1000 }));
    await bus.publish(command('HeartbeatProbeRequested', { probeId: 'p-other', machineId: 'm-2', timeoutMs: 1000 }));
    await eventually('ack', () => (published('HeartbeatAcked').length === 1 ? true : undefined));
    expect(published('HeartbeatAcked')[0].data).toMatchObject({ probeId: 'p-1', machineId: 'm-1' });

    signalAll(treeOf(runtime.status().roleProcess!.pid!), 'SIGKILL');
    const exit = await eventually('exit reported', () => published('AgentFaultSignalled')[0]);
    expect(exit.data).toMatchObject({ machineId: 'm-1', role: 'rollout', signal: 'process-exited', exitCode: 137 });
    await bus.publish(command('HeartbeatProbeRequested', { probeId: 'p-2', machineId: 'm-1', timeoutMs: 1000 }));
    await new Promise((r) => setTimeout(r, 300));
    expect(published('HeartbeatAcked').map((a) => (a.data as { probeId: string }).probeId)).toEqual(['p-1']);
  });

  it('restarts its crashed rollout engine in place when told, answers, and registers again so the machine rejoins', async () => {
    const firstPid = runtime.status().roleProcess!.pid!;
    signalAll(treeOf(firstPid), 'SIGKILL');
    await eventually('exit reported', () => published('AgentFaultSignalled')[0]);
    const { incarnation } = published('MachineRegistered')[0].data as { incarnation: string };
    // One for another machine and one for an earlier incarnation of this one change nothing.
    await bus.publish(command('RestartRolloutEngine', { recoveryId: 'other', commandId: 'other/1', machineId: 'm-2', attempt: 1, budget: 2 }));
    await bus.publish(
      command('RestartRolloutEngine', { recoveryId: 'old', commandId: 'old/1', machineId: 'm-1', attempt: 1, budget: 2, incarnation: 'earlier' }),
    );
    await bus.publish(command('RestartRolloutEngine', { recoveryId: 'r-9', commandId: 'r-9/1', machineId: 'm-1', attempt: 1, budget: 2, incarnation }));
    const answer = await eventually('engine restart answered', () =>
      published('RecoveryCommandSucceeded').find((m) => (m.data as { commandId: string }).commandId === 'r-9/1'),
    );
    expect(answer.data).toMatchObject({ recoveryId: 'r-9', machineId: 'm-1', executor: 'agent/m-1' });
    await eventually('second engine started', () => (starts('rollout').length === 2 ? true : undefined));
    expect(runtime.status().roleProcess).toMatchObject({ running: true, restarts: 1 });
    expect(runtime.status().roleProcess!.pid).not.toBe(firstPid);
    // The same agent process announces the machine again, after its answer: the pool, registry and router take it back.
    const registrations = await eventually('registered again', () =>
      published('MachineRegistered').length === 2 ? published('MachineRegistered') : undefined,
    );
    expect(registrations[1].data).toMatchObject({ machineId: 'm-1', role: 'rollout', incarnation, inferenceUrl: 'http://10.0.0.5:8000' });
    expect(registrations[1].causationId).toBe(published('RestartRolloutEngine').find((m) => (m.data as { commandId: string }).commandId === 'r-9/1')!.eventId);
    const answered = [...published('RecoveryCommandSucceeded'), ...published('RecoveryCommandFailed')].map((m) => (m.data as { commandId: string }).commandId);
    expect(answered).toEqual(['r-9/1']);
  });

  it('a trainer machine asked to restart a rollout engine says why it cannot', async () => {
    await bus.publish(command('PromoteRolloutToTrainer', { recoveryId: 'r-1', commandId: 'r-1/1', rolloutMachineId: 'm-1', replacesMachineId: 't-0' }));
    await eventually('promoted', () => published('RecoveryCommandSucceeded')[0]);
    await bus.publish(command('RestartRolloutEngine', { recoveryId: 'r-2', commandId: 'r-2/1', machineId: 'm-1', attempt: 1, budget: 2 }));
    const failure = await eventually('refused', () => published('RecoveryCommandFailed')[0]);
    expect(failure.data).toMatchObject({ commandId: 'r-2/1', error: 'm-1 is a trainer now, not a rollout' });
    expect(published('MachineRegistered')).toHaveLength(1); // refused: the machine does not announce itself again
  });

  it('promoted to warm standby it stops generating and becomes a trainer; the group restart starts the trainer once', async () => {
    // The controller's certificate for the lent machine (libs/bus role-certificates.ts): shown again as it says it trains.
    const roleCertificate = 'certificate-from-the-controller';
    await bus.publish(
      command('PromoteRolloutToTrainer', { recoveryId: 'r-1', commandId: 'r-1/1', rolloutMachineId: 'm-1', replacesMachineId: 't-0', roleCertificate }),
    );
    await eventually('promoted', () => published('RecoveryCommandSucceeded').find((m) => (m.data as { commandId: string }).commandId === 'r-1/1'));
    expect(published('MachineRoleChanged')[0].data).toEqual({ machineId: 'm-1', from: 'rollout', to: 'trainer', reason: expect.any(String), roleCertificate });
    expect(runtime.status().roleProcess!.running).toBe(false);
    expect(published('AgentFaultSignalled')).toEqual([]); // stopping it on purpose is not a fault

    const restart = command('RestartTrainerGroup', {
      recoveryId: 'r-1',
      commandId: 'r-1/3',
      machines: ['t-1', 'm-1'],
      step: 7,
      checkpointStep: 6,
      keepBatch: true,
      agentAddresses: { 't-1': 'http://10.0.0.7:8086', 'm-1': url },
      batchId: 'b-7',
    });
    // Before any restart the trainer has nothing to resume with.
    expect((await fetch(`${url}/v1/restart`)).status).toBe(404);
    await bus.publish(restart);
    await bus.publish({ ...restart }); // redelivered: carried out once
    await eventually('trainer started', () => (starts('trainer').length === 1 ? true : undefined));
    await eventually('answered', () => published('RecoveryCommandSucceeded').find((m) => (m.data as { commandId: string }).commandId === 'r-1/3'));
    await new Promise((r) => setTimeout(r, 300));
    // The re-formed group is told its members, this machine's rank and where to meet (rank 0's host).
    expect(starts('trainer')).toEqual(['trainer retry=7 ckpt=6 rank=1/2 master=10.0.0.7:29500 batch=b-7']);
    expect(await (await fetch(`${url}/v1/restart`)).json()).toEqual({
      recoveryId: 'r-1',
      commandId: 'r-1/3',
      step: 7,
      checkpointStep: 6,
      keepBatch: true,
      batchId: 'b-7',
      group: {
        rank: 1,
        worldSize: 2,
        members: [
          { machineId: 't-1', rank: 0, agentAddress: 'http://10.0.0.7:8086' },
          { machineId: 'm-1', rank: 1, agentAddress: url },
        ],
        masterAddr: '10.0.0.7',
        masterPort: 29500,
      },
    });
    // The kept batch comes from the request manager, which this agent was not given: a 503 that says so.
    const batch = await fetch(`${url}/v1/restart/batch?currentWeightVersion=7&maxStaleness=1`);
    expect(batch.status).toBe(503);
    expect(await batch.json()).toMatchObject({ error: expect.stringMatching(/ROBUSTRL_REQUEST_MANAGER_URL/) });
    expect((await fetch(`${url}/v1/restart/batch?currentWeightVersion=-1&maxStaleness=1`)).status).toBe(400);
    expect(published('RecoveryCommandSucceeded').filter((m) => (m.data as { commandId: string }).commandId === 'r-1/3')).toHaveLength(1);
    expect(published('RecoveryCommandSucceeded').find((m) => (m.data as { commandId: string }).commandId === 'r-1/3')!.data).toMatchObject({
      machineId: 'm-1',
      executor: 'agent/m-1',
    });
  });

  it('a trainer a newer group left out stops by itself (docs/contributors/recovery.md "Fencing"); a group of an older epoch, or one it is in, does not stop it', async () => {
    await bus.publish(command('PromoteRolloutToTrainer', { recoveryId: 'r-1', commandId: 'r-1/1', rolloutMachineId: 'm-1', replacesMachineId: 't-0' }));
    await eventually('promoted', () => published('RecoveryCommandSucceeded').find((m) => (m.data as { commandId: string }).commandId === 'r-1/1'));
    const group = (commandId: string, machines: string[], trainerEpoch: number) =>
      command('RestartTrainerGroup', { recoveryId: commandId.split('/')[0], commandId, machines, step: 7, checkpointStep: 6, keepBatch: true, trainerEpoch });
    await bus.publish(group('r-1/3', ['t-1', 'm-1'], 4));
    await eventually('trainer started', () => (runtime.status().roleProcess!.running && starts('trainer').length === 1 ? true : undefined));
    // Another machine's group of an older epoch (read late): not a replacement of this trainer.
    await bus.publish(group('r-0/2', ['t-1', 't-0'], 3));
    // A newer group with this machine in: its own restart, carried out.
    await bus.publish(group('r-2/1', ['t-1', 'm-1'], 5));
    await eventually('restarted at epoch 5', () => (starts('trainer').length === 2 ? true : undefined));
    await new Promise((r) => setTimeout(r, 300));
    expect(runtime.status().roleProcess!.running).toBe(true);
    // A newer group without it (a standby took its rank while it was cut off): it stops, and it is no fault.
    await bus.publish(group('r-3/1', ['t-1', 't-9'], 6));
    await eventually('fenced trainer stopped', () => (runtime.status().roleProcess!.running ? undefined : true));
    expect(published('AgentFaultSignalled')).toEqual([]);
    expect(published('RecoveryCommandSucceeded').map((m) => (m.data as { commandId: string }).commandId)).toEqual(['r-1/1', 'r-1/3', 'r-2/1']);
  });

  it('a group restart issued before its role process started restarts nothing, but still tells the process its group', async () => {
    // Issued after this agent started but before its role process did: that process is already the restarted one.
    const issuedAt = new Date(runtime.startedAt).toISOString();
    await bus.publish(
      createMessage(
        'RestartTrainerGroup',
        { recoveryId: 'r-0', commandId: 'r-0/1', machines: ['m-1'], step: 4, checkpointStep: 3, keepBatch: true, batchId: 'b-4' },
        { jobId: 'job-1', source: 'controller', occurredAt: issuedAt },
      ),
    );
    await eventually('answered', () => published('RecoveryCommandSucceeded').find((m) => (m.data as { commandId: string }).commandId === 'r-0/1'));
    expect(starts('rollout')).toHaveLength(1);
    expect(await (await fetch(`${url}/v1/restart`)).json()).toMatchObject({ step: 4, batchId: 'b-4', group: { rank: 0, worldSize: 1 } });
  });

  it('acts only on commands for its own incarnation: an old incarnation, or an undated replay from before it started, is ignored', async () => {
    const { incarnation } = published('MachineRegistered')[0].data as { incarnation: string };
    expect(incarnation).toBe(runtime.incarnation);
    const answered = (commandId: string) =>
      [...published('RecoveryCommandSucceeded'), ...published('RecoveryCommandFailed')].some((m) => (m.data as { commandId: string }).commandId === commandId);
    // Issued for this machine's previous agent process, and a replay from an hour ago that names none.
    await bus.publish(
      command('PromoteRolloutToTrainer', {
        recoveryId: 'old',
        commandId: 'old/1',
        rolloutMachineId: 'm-1',
        replacesMachineId: 't-0',
        incarnation: 'an-earlier-one',
      }),
    );
    await bus.publish(
      createMessage(
        'RestartTrainerGroup',
        { recoveryId: 'older', commandId: 'older/1', machines: ['m-1'], step: 1, checkpointStep: null, keepBatch: true },
        { jobId: 'job-1', source: 'controller', occurredAt: new Date(Date.now() - 3_600_000).toISOString() },
      ),
    );
    // Then one for this incarnation: carried out, so the two before it were seen and passed over.
    await bus.publish(
      command('PromoteRolloutToTrainer', { recoveryId: 'r-2', commandId: 'r-2/1', rolloutMachineId: 'm-1', replacesMachineId: 't-0', incarnation }),
    );
    await eventually('the current promotion answered', () => (answered('r-2/1') ? true : undefined));
    expect(answered('old/1')).toBe(false);
    expect(answered('older/1')).toBe(false);
    expect(published('MachineRoleChanged')).toHaveLength(1);
  });

  it('takes GPU activity pushed by the framework into its emulated source, validated', async () => {
    const pushed = await fetch(`${url}/v1/gpu-activity`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tensorActive: 0.5 }),
    });
    expect(pushed.status).toBe(202);
    const out = await fetch(`${url}/v1/gpu-activity`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tensorActive: 1.5 }),
    });
    expect(out.status).toBe(400);
  });
});

describe('a restarted trainer fetches its kept batch through its agent', () => {
  it('from the request manager, with the staleness bound it asks for', async () => {
    const asked: string[] = [];
    const credentials: Array<string | undefined> = [];
    const requestManager = createServer((req, res) => {
      asked.push(req.url ?? '');
      credentials.push(req.headers.authorization);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jobId: 'job-k', batchId: 'b-3', trajectories: [], stale: [] }));
    });
    await new Promise<void>((r) => requestManager.listen(0, '127.0.0.1', r));
    const bus = new InProcessBus();
    const runtime = new AgentRuntime(
      bus,
      agentConfigFromEnv({
        ROBUSTRL_JOB_ID: 'job-k',
        ROBUSTRL_MACHINE_ID: 't-0',
        ROBUSTRL_ROLE: 'trainer',
        ROBUSTRL_GPU_SOURCE: 'emulated',
        ROBUSTRL_TRAINER_COMMAND: 'exec sleep 60',
        ROBUSTRL_STOP_GRACE_SECONDS: '1',
        ROBUSTRL_WEIGHTS_PORT: '0',
        ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
        ROBUSTRL_REQUEST_MANAGER_URL: `http://127.0.0.1:${(requestManager.address() as AddressInfo).port}`,
        ROBUSTRL_REQUEST_MANAGER_TOKEN: 'store-token-0123456789',
        ROBUSTRL_RENDEZVOUS_PORT: '29600',
      }),
    );
    try {
      await runtime.start('http://127.0.0.1:1');
      await bus.publish(
        createMessage(
          'RestartTrainerGroup',
          {
            recoveryId: 'r',
            commandId: 'r/1',
            machines: ['t-0'],
            step: 3,
            checkpointStep: 2,
            keepBatch: true,
            batchId: 'b-3',
            agentAddresses: { 't-0': '[::1]:8086' },
          },
          { jobId: 'job-k', source: 'controller', occurredAt: new Date().toISOString() },
        ),
      );
      await eventually('restarted', () => runtime.restart ?? undefined);
      expect(runtime.restart!.group).toMatchObject({ rank: 0, worldSize: 1, masterAddr: '::1', masterPort: 29600 });
      expect(await runtime.keptBatch({ currentWeightVersion: 3, maxStaleness: 1 })).toEqual({ jobId: 'job-k', batchId: 'b-3', trajectories: [], stale: [] });
      expect(asked).toEqual(['/v1/jobs/job-k/batches/b-3/completed?currentWeightVersion=3&maxStaleness=1']);
      expect(credentials).toEqual(['Bearer store-token-0123456789']);
    } finally {
      await runtime.stop();
      await bus.close();
      await new Promise((r) => requestManager.close(r));
    }
  });
});

describe('a role process that exits 0', () => {
  const run = async (role: 'trainer' | 'rollout') => {
    const bus = new InProcessBus();
    const runtime = new AgentRuntime(
      bus,
      agentConfigFromEnv({
        ROBUSTRL_JOB_ID: 'job-x',
        ROBUSTRL_MACHINE_ID: 'm-x',
        ROBUSTRL_ROLE: role,
        ROBUSTRL_GPU_SOURCE: 'emulated',
        ROBUSTRL_TRAINER_COMMAND: 'exit 0',
        ROBUSTRL_ROLLOUT_COMMAND: 'exit 0',
        ROBUSTRL_STOP_GRACE_SECONDS: '1',
        ROBUSTRL_WEIGHTS_PORT: '0',
        ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
      }),
    );
    try {
      await runtime.start('http://127.0.0.1:1');
      await eventually('the role process exited', () => (runtime.status().roleProcess!.running ? undefined : true));
      await new Promise((r) => setTimeout(r, 200));
      return bus
        .read(Topics.heartbeat)
        .concat(bus.read(Topics.telemetry))
        .map((r) => decodeMessage(r.value))
        .filter((d) => d.ok && d.message.type === 'AgentFaultSignalled');
    } finally {
      await runtime.stop();
      await bus.close();
    }
  };

  it('is a finished trainer, not a fault (a finished job was restarted as a task)', async () => {
    expect(await run('trainer')).toHaveLength(0);
  });

  it('is still a fault for a rollout engine: it stopped serving', async () => {
    expect(await run('rollout')).toHaveLength(1);
  });
});
