import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { InProcessBus } from '@robustrl/bus';
import { createMessage, decodeMessage, MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { eventually } from '@robustrl/testing/eventually';
import { AgentApiController } from '../agent-api.controller';
import { agentConfigFromEnv } from '../agent-config';
import { AgentRuntime } from '../agent-runtime';
import { CommandsApiController } from './commands-api.controller';

/** The agent in cooperate mode against the in-process bus: the framework is this spec, over the real HTTP API. */
describe('an agent in cooperate mode (the framework owns its processes)', () => {
  let bus: InProcessBus;
  let runtime: AgentRuntime;
  let app: INestApplication;
  let url: string;

  const published = <T extends MessageType>(type: T) =>
    Object.values(Topics)
      .flatMap((t) => bus.read(t))
      .map((r) => decodeMessage(r.value))
      .filter((d): d is { ok: true; message: RobustrlMessage } => d.ok && d.message.type === type)
      .map((d) => d.message as MessageOf<T>);
  const command = <T extends MessageType>(type: T, data: MessageOf<T>['data']) =>
    createMessage(type, data, { jobId: 'job-1', source: 'controller', occurredAt: new Date().toISOString() });
  const http = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const poll = async (waitMs = 0) => (await http('GET', `/v1/commands?waitMs=${waitMs}`)).body.commands as Array<Record<string, unknown>>;
  const id = (commandId: string) => encodeURIComponent(commandId);

  async function start(env: Record<string, string>): Promise<void> {
    bus = new InProcessBus();
    runtime = new AgentRuntime(
      bus,
      agentConfigFromEnv({
        ROBUSTRL_JOB_ID: 'job-1',
        ROBUSTRL_MACHINE_ID: 'm-1',
        ROBUSTRL_ROLE: 'rollout',
        ROBUSTRL_INTEGRATION: 'cooperate',
        ROBUSTRL_GPU_SOURCE: 'emulated',
        ROBUSTRL_GPU_SAMPLE_SECONDS: '3600',
        ROBUSTRL_WEIGHTS_PORT: '0',
        ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
        ...env,
      }),
    );
    const moduleRef = await Test.createTestingModule({
      controllers: [AgentApiController, CommandsApiController],
      providers: [{ provide: AgentRuntime, useValue: runtime }],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    await runtime.start(url);
  }

  afterEach(async () => {
    await runtime?.stop();
    await app?.close();
    await bus?.close();
  });

  it('refuses a role command with cooperate mode, naming it', () => {
    expect(() =>
      agentConfigFromEnv({
        ROBUSTRL_JOB_ID: 'j',
        ROBUSTRL_MACHINE_ID: 'm',
        ROBUSTRL_ROLE: 'trainer',
        ROBUSTRL_INTEGRATION: 'cooperate',
        ROBUSTRL_TRAINER_COMMAND: 'x',
      }),
    ).toThrow(/ROBUSTRL_TRAINER_COMMAND: not with ROBUSTRL_INTEGRATION=cooperate/);
    expect(() => agentConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_MACHINE_ID: 'm', ROBUSTRL_ROLE: 'trainer', ROBUSTRL_INTEGRATION: 'parent' })).toThrow(
      /ROBUSTRL_INTEGRATION/,
    );
  });

  it('an engine restart: offered until acknowledged, answered as the framework reports, the machine registered again', async () => {
    await start({});
    const registered = () => published('MachineRegistered').length;
    expect(registered()).toBe(1);
    await bus.publish(command('RestartRolloutEngine', { recoveryId: 'r-1', commandId: 'r-1/1', machineId: 'm-1', attempt: 1, budget: 2 }));
    const [offered] = await poll(2_000);
    expect(offered).toMatchObject({ commandId: 'r-1/1', type: 'RestartRolloutEngine', recoveryId: 'r-1', attempt: 1, budget: 2 });
    expect(await poll()).toHaveLength(1); // not acknowledged yet: offered again
    expect((await http('POST', `/v1/commands/${id('r-1/1')}/ack`)).body).toEqual({ commandId: 'r-1/1', result: 'acknowledged' });
    expect(await poll()).toEqual([]);
    expect(published('RecoveryCommandSucceeded')).toEqual([]); // nothing answered before the framework says so
    expect((await http('POST', `/v1/commands/${id('r-1/1')}/outcome`, { outcome: 'succeeded' })).status).toBe(200);
    const [answer] = await eventually('the answer', () => published('RecoveryCommandSucceeded')[0] && published('RecoveryCommandSucceeded'));
    expect(answer.data).toMatchObject({ recoveryId: 'r-1', commandId: 'r-1/1', machineId: 'm-1', executor: 'agent/m-1' });
    await eventually('registered again', () => registered() === 2 || undefined);
    expect((await http('POST', `/v1/commands/${id('r-1/1')}/outcome`, { outcome: 'succeeded' })).body.result).toBe('already-settled');
    expect((await http('POST', `/v1/commands/${id('r-1/1')}/outcome`, { outcome: 'failed', error: 'x' })).status).toBe(409);
  });

  it("a failure the framework reports is the command's failure, with its error", async () => {
    await start({});
    await bus.publish(command('RestartRolloutEngine', { recoveryId: 'r-2', commandId: 'r-2/1', machineId: 'm-1', attempt: 1, budget: 2 }));
    await poll(2_000);
    expect((await http('POST', `/v1/commands/${id('r-2/1')}/outcome`, { outcome: 'failed' })).status).toBe(400); // no error named
    await http('POST', `/v1/commands/${id('r-2/1')}/outcome`, { outcome: 'failed', error: 'the engine would not load its model' });
    const [failed] = await eventually('the failure', () => published('RecoveryCommandFailed')[0] && published('RecoveryCommandFailed'));
    expect(failed.data.error).toBe('the framework could not carry it out: the engine would not load its model');
    expect(published('MachineRegistered')).toHaveLength(1);
  });

  it('a trainer group restart carries the group and the launcher environment; GET /v1/restart answers the same', async () => {
    await start({ ROBUSTRL_ROLE: 'trainer', ROBUSTRL_MACHINE_ID: 'trainer-1' });
    await bus.publish(
      command('RestartTrainerGroup', {
        recoveryId: 'r-3',
        commandId: 'r-3/1',
        machines: ['trainer-0', 'trainer-1'],
        step: 7,
        checkpointStep: 6,
        keepBatch: false,
        hostAddresses: { 'trainer-0': '10.0.0.1', 'trainer-1': '10.0.0.2' },
        trainerEpoch: 3,
      }),
    );
    const [offered] = await poll(2_000);
    expect(offered).toMatchObject({
      type: 'RestartTrainerGroup',
      restart: { step: 7, checkpointStep: 6, group: { rank: 1, worldSize: 2, masterAddr: '10.0.0.1', trainerEpoch: 3 } },
      env: { RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: '10.0.0.1', ROBUSTRL_RETRY_STEP: '7' },
    });
    expect((await http('GET', '/v1/restart')).body).toEqual(offered.restart);
  });

  it('GET /v1/launch: 503 while the first launch gathers its group, then the group and the launcher environment; 404 where none is formed', async () => {
    await start({ ROBUSTRL_ROLE: 'trainer', ROBUSTRL_MACHINE_ID: 'trainer-1', ROBUSTRL_TRAINER_WORLD_SIZE: '2', ROBUSTRL_ADVERTISE_HOST: '10.0.0.2' });
    const gathering = await http('GET', '/v1/launch');
    expect(gathering.status).toBe(503);
    expect(gathering.body.error).toMatch(/waiting for 2 trainer machines/);
    await bus.publish(
      createMessage(
        'MachineRegistered',
        {
          machineId: 'trainer-0',
          role: 'trainer',
          zone: 'z',
          hardwareClass: 'h',
          gpus: 1,
          agentAddress: 'http://10.0.0.1:8086',
          hostAddress: '10.0.0.1',
          dpRank: null,
        },
        { jobId: 'job-1', source: 'agent/trainer-0', occurredAt: new Date().toISOString() },
      ),
    );
    const launch = await eventually('the group formed', async () => {
      const r = await http('GET', '/v1/launch');
      return r.status === 200 ? r.body : undefined;
    });
    expect(launch).toMatchObject({
      group: { rank: 1, worldSize: 2, masterAddr: '10.0.0.1' },
      env: { RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: '10.0.0.1' },
      restart: null,
    });
  });

  it('GET /v1/launch is 404 on an agent that forms no trainer group', async () => {
    await start({});
    expect((await http('GET', '/v1/launch')).status).toBe(404);
  });

  it('promoted to warm standby: the framework stops its engine, then the machine is a trainer (role change before the answer)', async () => {
    await start({});
    await bus.publish(command('PromoteRolloutToTrainer', { recoveryId: 'r-4', commandId: 'r-4/1', rolloutMachineId: 'm-1', replacesMachineId: 'trainer-0' }));
    const [offered] = await poll(2_000);
    expect(offered).toMatchObject({ type: 'PromoteRolloutToTrainer', replacesMachineId: 'trainer-0' });
    expect(runtime.role).toBe('rollout');
    await http('POST', `/v1/commands/${id('r-4/1')}/outcome`, { outcome: 'succeeded' });
    await eventually('the answer', () => published('RecoveryCommandSucceeded')[0]);
    expect(runtime.role).toBe('trainer');
    const types = Object.values(Topics)
      .flatMap((t) => bus.read(t))
      .map((r) => decodeMessage(r.value))
      .flatMap((d) => (d.ok ? [d.message.type] : []))
      .filter((t) => t === 'MachineRoleChanged' || t === 'RecoveryCommandSucceeded');
    expect(types).toEqual(['MachineRoleChanged', 'RecoveryCommandSucceeded']);
  });

  it('vouches for the role (answers probes) only while the framework follows commands; takes its process exit as a fault signal', async () => {
    await start({ ROBUSTRL_FRAMEWORK_ATTACHED_SECONDS: '0.3' });
    const probe = (n: number) => bus.publish(command('HeartbeatProbeRequested', { probeId: `p-${n}`, machineId: 'm-1', timeoutMs: 1000 }));
    await probe(1);
    await new Promise((r) => setTimeout(r, 200));
    expect(published('HeartbeatAcked')).toEqual([]); // no framework has polled
    await poll();
    await probe(2);
    await eventually('acked', () => published('HeartbeatAcked')[0]);
    await new Promise((r) => setTimeout(r, 500));
    await probe(3);
    await new Promise((r) => setTimeout(r, 200));
    expect(published('HeartbeatAcked').map((m) => m.data.probeId)).toEqual(['p-2']); // gone quiet past its window
    expect((await http('POST', '/v1/errors', { signal: 'process-exited', detail: 'worker 3 died', exitCode: 137 })).status).toBe(202);
    expect(published('AgentFaultSignalled')[0].data).toMatchObject({ signal: 'process-exited', detail: 'worker 3 died', exitCode: 137 });
  });

  it('a trainer fenced out by a newer group: the framework is told to stop, and the agent stops vouching until a restart is carried out', async () => {
    await start({ ROBUSTRL_ROLE: 'trainer', ROBUSTRL_MACHINE_ID: 'trainer-1' });
    const group = (commandId: string, machines: string[], trainerEpoch: number) =>
      command('RestartTrainerGroup', { recoveryId: commandId.split('/')[0], commandId, machines, step: 7, checkpointStep: 6, keepBatch: false, trainerEpoch });
    const probe = (n: number) => bus.publish(command('HeartbeatProbeRequested', { probeId: `p-${n}`, machineId: 'trainer-1', timeoutMs: 1000 }));
    await poll();
    await bus.publish(group('r-5/1', ['trainer-0'], 4)); // a newer group without this machine
    const [stop] = await poll(2_000);
    expect(stop).toMatchObject({ type: 'StopRole', commandId: 'stop/fenced/r-5/1' });
    expect(String(stop.reason)).toMatch(/newer group|epoch/);
    await http('POST', `/v1/commands/${id(String(stop.commandId))}/ack`);
    await probe(1);
    await new Promise((r) => setTimeout(r, 300));
    expect(published('HeartbeatAcked')).toEqual([]); // stopped: not vouched for, though the framework polls
    await bus.publish(group('r-6/1', ['trainer-0', 'trainer-1'], 5)); // taken back in
    const [restart] = await poll(2_000);
    await http('POST', `/v1/commands/${id(String(restart.commandId))}/outcome`, { outcome: 'succeeded' });
    await eventually('the restart answered', () => published('RecoveryCommandSucceeded')[0]);
    await probe(2);
    await eventually('vouched for again', () => published('HeartbeatAcked')[0]);
  });

  it('an agent that supervises its role answers 409 on the command routes and 400 on a process exit reported to it', async () => {
    await start({ ROBUSTRL_INTEGRATION: 'supervise' });
    const polled = await http('GET', '/v1/commands');
    expect(polled.status).toBe(409);
    expect(polled.body.error).toMatch(/ROBUSTRL_INTEGRATION=cooperate/);
    expect((await http('POST', '/v1/commands/x/ack')).status).toBe(409);
    const exit = await http('POST', '/v1/errors', { signal: 'process-exited', detail: 'x' });
    expect(exit.status).toBe(400);
    expect(exit.body.issues).toEqual([expect.objectContaining({ path: 'signal' })]);
  });
  it('takes the engines the framework started (PUT /v1/engines): registered again with them; a bad list is a 400 naming the field', async () => {
    await start({ ROBUSTRL_ENGINE_WEIGHTS: 'vllm' });
    const first = published('MachineRegistered');
    expect(first).toHaveLength(1);
    expect(first[0].data.engines).toBeUndefined();
    const put = await http('PUT', '/v1/engines', {
      engines: [
        { name: 'tp0', url: 'http://127.0.0.1:18000' },
        { name: 'tp1', url: 'http://127.0.0.1:18001/' },
      ],
    });
    expect(put.status).toBe(200);
    const engines = [
      { engineId: 'm-1/tp0', url: 'http://127.0.0.1:18000' },
      { engineId: 'm-1/tp1', url: 'http://127.0.0.1:18001' },
    ];
    expect(put.body).toEqual({ engines });
    const again = published('MachineRegistered');
    expect(again).toHaveLength(2);
    // The same agent process: the registry keeps the weights it holds (its incarnation is unchanged).
    expect(again[1].data).toMatchObject({ machineId: 'm-1', role: 'rollout', engines, incarnation: again[0].data.incarnation });
    expect(again[1].data.inferenceUrl).toBeUndefined();
    expect((await http('GET', '/v1/status')).body.engines).toEqual(engines);

    const bad = await http('PUT', '/v1/engines', {
      engines: [
        { name: 'a b', url: 'ftp://x' },
        { name: 'a b', url: 'http://x:1' },
      ],
    });
    expect(bad.status).toBe(400);
    const issues = (bad.body.issues as Array<{ path: string }>).map((i) => i.path);
    expect(issues).toEqual(expect.arrayContaining(['engines.0.name', 'engines.0.url', 'engines']));
    expect(published('MachineRegistered')).toHaveLength(2);
  });

  it('the engines it told are forgotten when it restarts them: registered again with none, until it tells the new ones', async () => {
    await start({ ROBUSTRL_ENGINE_WEIGHTS: 'vllm' });
    await http('PUT', '/v1/engines', { engines: [{ name: 'vllm', url: 'http://127.0.0.1:18000' }] });
    expect(published('MachineRegistered')[1].data.engines).toEqual([{ engineId: 'm-1/vllm', url: 'http://127.0.0.1:18000' }]);
    await bus.publish(command('RestartRolloutEngine', { recoveryId: 'r-9', commandId: 'r-9/1', machineId: 'm-1', attempt: 1, budget: 2 }));
    await poll(2_000);
    await http('POST', `/v1/commands/${id('r-9/1')}/ack`);
    await http('POST', `/v1/commands/${id('r-9/1')}/outcome`, { outcome: 'succeeded' });
    const afterRestart = await eventually('registered again', () => published('MachineRegistered')[2]);
    // The old address may be a server shutting down: the router must not be sent there.
    expect(afterRestart.data.engines).toBeUndefined();
    expect(afterRestart.data.inferenceUrl).toBeUndefined();
    expect((await http('GET', '/v1/status')).body.engines).toEqual([]);
    await http('PUT', '/v1/engines', { engines: [{ name: 'vllm', url: 'http://127.0.0.1:18007' }] });
    expect(published('MachineRegistered')[3].data.engines).toEqual([{ engineId: 'm-1/vllm', url: 'http://127.0.0.1:18007' }]);
  });
});
