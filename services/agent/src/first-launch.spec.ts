import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InProcessBus } from '@robustrl/bus';
import { createMessage, DataOf, MessageOf } from '@robustrl/contracts';
import { eventually } from '@robustrl/testing/eventually';
import { agentConfigFromEnv } from './agent-config';
import { AgentRuntime } from './agent-runtime';
import { restartContextOf } from './trainer-group';
import { TrainerRoster } from './trainer-roster';

const at = { jobId: 'job-g', source: 'test', occurredAt: '2026-11-26T00:00:00.000Z' };
const registered = (machineId: string, role: 'trainer' | 'rollout', hostAddress?: string, dpRank: number | null = null) =>
  createMessage(
    'MachineRegistered',
    { machineId, role, zone: 'z', hardwareClass: 'h', gpus: 1, agentAddress: 'http://127.0.0.1:8086', dpRank, ...(hostAddress ? { hostAddress } : {}) },
    at,
  ) as MessageOf<'MachineRegistered'>;

describe('the trainer roster (a first launch’s group from the job’s membership)', () => {
  it('waits for the world size, ranks by data-parallel rank then id, and meets at rank 0’s host', () => {
    const roster = new TrainerRoster('job-g');
    roster.apply(registered('t-b', 'trainer', '10.0.0.2'));
    expect(roster.group('t-b', 2, 29500)).toBeNull();
    expect(roster.waitingFor('t-b', 2)).toBe('1 more trainer machine(s) to register (have t-b)');
    roster.apply(registered('r-0', 'rollout', '10.0.0.9'));
    roster.apply(registered('t-a', 'trainer', '10.0.0.1'));
    roster.apply({ ...registered('t-x', 'trainer', '10.0.0.3'), jobId: 'another-job' });
    expect(roster.group('t-b', 2, 29500)).toEqual({
      rank: 1,
      worldSize: 2,
      members: [
        { machineId: 't-a', rank: 0, agentAddress: null },
        { machineId: 't-b', rank: 1, agentAddress: null },
      ],
      masterAddr: '10.0.0.1',
      masterPort: 29500,
      // The job's first group (docs/contributors/recovery.md "Fencing").
      trainerEpoch: 0,
    });
    // A data-parallel rank orders before ids.
    roster.apply(registered('t-b', 'trainer', '10.0.0.2', 0));
    expect(roster.group('t-a', 2, 29500)).toMatchObject({ rank: 1, masterAddr: '10.0.0.2' });
  });

  it('follows role changes and departures; a machine past the world size waits for a place', () => {
    const roster = new TrainerRoster('job-g');
    for (const m of [registered('t-0', 'trainer', '10.0.0.1'), registered('t-1', 'trainer', '10.0.0.2'), registered('t-2', 'trainer', '10.0.0.3')])
      roster.apply(m);
    expect(roster.group('t-2', 2, 1)).toBeNull();
    expect(roster.waitingFor('t-2', 2)).toBe('a place in the group: the first 2 trainers are t-0, t-1');
    roster.apply(createMessage('MachineDeregistered', { machineId: 't-0', reason: 'replaced' }, at) as MessageOf<'MachineDeregistered'>);
    expect(roster.group('t-2', 2, 1)).toMatchObject({ rank: 1, masterAddr: '10.0.0.2' });
    roster.apply(registered('r-5', 'rollout', '10.0.0.5'));
    roster.apply(
      createMessage('MachineRoleChanged', { machineId: 'r-5', from: 'rollout', to: 'trainer', reason: 'standby' }, at) as MessageOf<'MachineRoleChanged'>,
    );
    expect(roster.trainers()).toEqual(['r-5', 't-1', 't-2']);
  });

  it('after a task restart (a resumed JobStarted) forgets the membership of the previous incarnation, even delivered late', () => {
    const roster = new TrainerRoster('job-g');
    const when = (s: number) => ({ jobId: 'job-g', source: 'spec', occurredAt: new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString() });
    const reg = (s: number, machineId: string, role: 'trainer' | 'rollout', host: string) =>
      createMessage(
        'MachineRegistered',
        { machineId, role, zone: 'z', hardwareClass: 'h', gpus: 1, agentAddress: 'http://x', dpRank: null, hostAddress: host },
        when(s),
      ) as MessageOf<'MachineRegistered'>;
    roster.apply(reg(1, 't-1', 'trainer', '10.0.0.2'));
    roster.apply(reg(1, 'r-0', 'rollout', '10.0.0.9'));
    // r-0 lent as warm standby before the restart: a trainer then, a rollout again after it.
    roster.apply(
      createMessage('MachineRoleChanged', { machineId: 'r-0', from: 'rollout', to: 'trainer', reason: 'standby' }, when(5)) as MessageOf<'MachineRoleChanged'>,
    );
    roster.apply(
      createMessage(
        'JobStarted',
        { mode: 'semi-sync', resumedFromStep: 4, trainerMachines: 2, rolloutMachines: 4, trainerEpoch: 3 },
        when(10),
      ) as MessageOf<'JobStarted'>,
    );
    expect(roster.trainers()).toEqual([]);
    roster.apply(reg(12, 't-1', 'trainer', '10.0.0.2'));
    roster.apply(reg(13, 't-2', 'trainer', '10.0.0.3'));
    // An old registration read late (another partition of the topic) does not come back.
    roster.apply(reg(2, 't-0', 'trainer', '10.0.0.1'));
    expect(roster.group('t-2', 2, 1)).toMatchObject({ rank: 1, masterAddr: '10.0.0.2', members: [{ machineId: 't-1' }, { machineId: 't-2' }] });
    // The restarted task's group starts at the epoch its RestartTask carried (docs/contributors/recovery.md "Fencing").
    expect(roster.group('t-1', 2, 1)).toMatchObject({ rank: 0, trainerEpoch: 3 });
  });

  it('a task restarted before any checkpoint (resumed from none, with its trainer epoch) is a restart too', () => {
    const roster = new TrainerRoster('job-g');
    const when = (s: number) => ({ jobId: 'job-g', source: 'spec', occurredAt: new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString() });
    const reg = (s: number, machineId: string) =>
      createMessage(
        'MachineRegistered',
        { machineId, role: 'trainer', zone: 'z', hardwareClass: 'h', gpus: 1, agentAddress: 'http://x', dpRank: null, hostAddress: '10.0.0.2' },
        when(s),
      ) as MessageOf<'MachineRegistered'>;
    const started = (s: number, trainerEpoch?: number) =>
      createMessage(
        'JobStarted',
        { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 1, ...(trainerEpoch === undefined ? {} : { trainerEpoch }) },
        when(s),
      ) as MessageOf<'JobStarted'>;
    roster.apply(started(0));
    roster.apply(reg(1, 't-0'));
    expect(roster.group('t-0', 1, 1)).toMatchObject({ rank: 0, trainerEpoch: 0 });
    roster.apply(started(10, 1));
    // The registration from before the restart is forgotten; the group forms again at the restart's epoch.
    expect(roster.group('t-0', 1, 1)).toBeNull();
    roster.apply(reg(12, 't-0'));
    expect(roster.group('t-0', 1, 1)).toMatchObject({ rank: 0, trainerEpoch: 1 });
  });

  it('forms no group before its own registration of this incarnation is read: history caught up on half-way is not the group', () => {
    const roster = new TrainerRoster('job-g');
    const when = (s: number) => ({ jobId: 'job-g', source: 'spec', occurredAt: new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString() });
    const reg = (s: number, machineId: string, host: string) =>
      createMessage(
        'MachineRegistered',
        { machineId, role: 'trainer', zone: 'z', hardwareClass: 'h', gpus: 1, agentAddress: 'http://x', dpRank: null, hostAddress: host },
        when(s),
      ) as MessageOf<'MachineRegistered'>;
    // The previous incarnation's group, read first: complete, but not this agent's (started at 30 s).
    roster.apply(reg(1, 't-0', '10.0.0.1'));
    roster.apply(reg(1, 't-1', '10.0.0.2'));
    const startedAt = Date.UTC(2026, 0, 1, 0, 0, 30);
    expect(roster.group('t-1', 2, 1, startedAt)).toBeNull();
    expect(roster.waitingFor('t-1', 2, startedAt)).toBe('its own registration to be read back from the membership topic');
    roster.apply(createMessage('MachineDeregistered', { machineId: 't-0', reason: 'isolated' }, when(20)) as MessageOf<'MachineDeregistered'>);
    roster.apply(reg(31, 't-2', '10.0.0.3'));
    roster.apply(reg(32, 't-1', '10.0.0.2'));
    expect(roster.group('t-1', 2, 1, startedAt)).toMatchObject({ rank: 0, masterAddr: '10.0.0.2', members: [{ machineId: 't-1' }, { machineId: 't-2' }] });
  });

  it('does not launch towards a rank 0 that registered no reachable host', () => {
    const roster = new TrainerRoster('job-g');
    roster.apply(registered('t-0', 'trainer'));
    roster.apply(registered('t-1', 'trainer', '10.0.0.2'));
    expect(roster.group('t-1', 2, 1)).toBeNull();
    expect(roster.waitingFor('t-1', 2)).toMatch(/rank 0 \(t-0\) to register its host address/);
  });
});

describe('a restart meets at rank 0’s registered host', () => {
  const command: DataOf<'RestartTrainerGroup'> = {
    recoveryId: 'r',
    commandId: 'r/1',
    machines: ['t-0', 't-1'],
    step: 4,
    checkpointStep: 3,
    keepBatch: true,
    agentAddresses: { 't-0': 'http://127.0.0.1:8086', 't-1': 'http://127.0.0.1:8086' },
  };

  it('prefers the host address over the loopback agent API', () => {
    expect(restartContextOf({ ...command, hostAddresses: { 't-0': '10.1.0.4', 't-1': '10.1.0.5' } }, 't-1', 29500).group).toMatchObject({
      rank: 1,
      worldSize: 2,
      masterAddr: '10.1.0.4',
    });
  });

  it('falls back to the agent address’s host for agents that register none', () => {
    expect(restartContextOf(command, 't-1', 29500).group.masterAddr).toBe('127.0.0.1');
  });
});

describe('agents launching a two-rank trainer group', () => {
  it('each first launch gets its rank, the world size and rank 0’s host from its agent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'robustrl-first-launch-'));
    const bus = new InProcessBus();
    const agent = (machineId: string, host: string) =>
      new AgentRuntime(
        bus,
        agentConfigFromEnv({
          ROBUSTRL_JOB_ID: 'job-g',
          ROBUSTRL_MACHINE_ID: machineId,
          ROBUSTRL_ROLE: 'trainer',
          ROBUSTRL_GPU_SOURCE: 'emulated',
          ROBUSTRL_GPU_SAMPLE_SECONDS: '3600',
          ROBUSTRL_TRAINER_COMMAND: `echo "$RANK/$WORLD_SIZE $MASTER_ADDR:$MASTER_PORT $ROBUSTRL_GROUP" > ${dir}/$ROBUSTRL_MACHINE_ID; exec sleep 60`,
          ROBUSTRL_TRAINER_WORLD_SIZE: '2',
          ROBUSTRL_ADVERTISE_HOST: host,
          ROBUSTRL_RENDEZVOUS_PORT: '29611',
          ROBUSTRL_STOP_GRACE_SECONDS: '1',
          ROBUSTRL_WEIGHTS_PORT: '0',
          ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
        }),
      );
    // Rank 1 starts first: it waits for rank 0 to register.
    const second = agent('trainer-1', '10.9.0.2');
    const first = agent('trainer-0', '10.9.0.1');
    try {
      await second.start('http://127.0.0.1:1');
      await new Promise((r) => setTimeout(r, 300));
      expect(readdirSync(dir)).toEqual([]);
      expect(second.status().roleProcess!.running).toBe(false);
      await first.start('http://127.0.0.1:2');
      await eventually('both launched', () => (readdirSync(dir).length === 2 ? true : undefined), 10_000);
      expect(readFileSync(join(dir, 'trainer-0'), 'utf8').trim()).toBe('0/2 10.9.0.1:29611 trainer-0,trainer-1');
      expect(readFileSync(join(dir, 'trainer-1'), 'utf8').trim()).toBe('1/2 10.9.0.1:29611 trainer-0,trainer-1');
    } finally {
      await first.stop();
      await second.stop();
      await bus.close();
    }
  });
});
