import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createMessage } from '@robustrl/contracts';
import { MachineSpec } from '@robustrl/orchestrator';
import { eventually } from '@robustrl/testing/eventually';
import { CooperatingJob } from './fixtures/cooperating-job';

/**
 * A Ray job under robustrl (README "Integrate your job: Ray"): a driver (fixtures/ray_job.py) starts a
 * real Ray cluster of one node per machine on this host and keeps its workers in
 * `robustrl.ray.ElasticWorkerGroup` — two trainer machines × two trainer actors (real torch, gloo) and
 * one rollout actor — while each machine's agent runs in cooperate mode. A killed trainer actor: the
 * group reports it, robustrl restarts the trainer group, the group replaces both machines' trainer actors
 * with the ranks it is told and leaves the rollout actor alone. A killed rollout actor: replaced in
 * place. The driver never restarts. Real Kafka, PostgreSQL, Ray and torch (deploy/local/vllm.sh's
 * environment).
 */
const REPO = join(__dirname, '..', '..');
const DRIVER = join(__dirname, 'fixtures', 'ray_job.py');

jest.setTimeout(300_000);

interface LedgerLine {
  machine: string;
  role: 'trainer' | 'rollout';
  rank: number | null;
  world: number | null;
  local: number;
  step: number | null;
  pid: number;
  node: string;
}

describe('Ray: an elastic worker group driven by robustrl (real Ray cluster of 3 nodes, torch, Kafka, PostgreSQL)', () => {
  const jobId = `job-ray-${randomBytes(3).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'robustrl-ray-'));
  const ledgerPath = join(dir, 'ledger.jsonl');
  const rendezvousPort = String(20_000 + Math.floor(Math.random() * 10_000));
  const machines: MachineSpec[] = [
    { machineId: 'trainer-0', role: 'trainer', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    { machineId: 'trainer-1', role: 'trainer', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    // Another zone: never trainer-0's or trainer-1's warm standby here.
    { machineId: 'rollout-0', role: 'rollout', zone: 'az-2', hardwareClass: 'cpu-e2e' },
  ];
  const agents = new Map<string, string>();
  let driver: ChildProcess | undefined;
  let driverPid: number | undefined;
  const job = new CooperatingJob('ray', jobId, {
    agentEnv: { ROBUSTRL_TRAINER_WORLD_SIZE: '2', ROBUSTRL_RENDEZVOUS_PORT: rendezvousPort },
    commandTimeoutSeconds: 90,
    onRegistered: (m) => {
      if (m.data.agentAddress) agents.set(m.data.machineId, m.data.agentAddress);
    },
  });
  const all: CooperatingJob['all'] = (type, where) => job.all(type, where);
  const waitFor: CooperatingJob['waitFor'] = (type, what, where, timeoutMs = 120_000) => job.waitFor(type, what, where, timeoutMs);
  const ledger = (): LedgerLine[] =>
    existsSync(ledgerPath)
      ? readFileSync(ledgerPath, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as LedgerLine)
      : [];
  const dumpAndThrow = (err: Error): never => {
    process.stderr.write(
      `--- driver and machine output ---\n${job.output.slice(-150).join('\n')}\n--- events ---\n${job.seen
        .filter((m) => m.type !== 'GpuActivitySampled')
        .map((m) => `${m.occurredAt} ${m.type} ${JSON.stringify(m.data)}`)
        .join('\n')}\n`,
    );
    throw err;
  };
  const places = (lines: LedgerLine[]) => lines.map((l) => `${l.machine} rank ${l.rank}/${l.world} local ${l.local}`).sort();

  beforeAll(async () => {
    const python = execFileSync('bash', [join(REPO, 'deploy', 'local', 'vllm.sh'), 'status'], { encoding: 'utf8' })
      .trim()
      .split('\n')[0];
    await job.open();
    await job.bus.publish(
      createMessage(
        'JobStarted',
        {
          mode: 'semi-sync',
          resumedFromStep: null,
          trainerMachines: 2,
          rolloutMachines: 1,
          detection: { trainerIdleWindowSeconds: 45, rolloutSilentWindowSeconds: 10, probeTimeoutSeconds: 5 },
        },
        { jobId, source: 'e2e', occurredAt: new Date().toISOString() },
      ),
    );
    // The Ray cluster first (as a cluster is up before a job is launched on it), then the machines.
    const machinesFile = join(dir, 'machines.json');
    let clusterUp = false;
    driver = spawn(python, [DRIVER], {
      env: {
        ...process.env,
        E2E_MACHINE_IDS: machines.map((m) => m.machineId).join(','),
        E2E_MACHINES: machinesFile,
        E2E_LEDGER: ledgerPath,
        E2E_STEP_SECONDS: '1',
        E2E_NPROC: '2',
        OMP_NUM_THREADS: '1',
        PYTHONUNBUFFERED: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [driver.stdout!, driver.stderr!])
      createInterface({ input: stream }).on('line', (line) => {
        job.output.push(`[driver] ${line}`);
        if (line === '{"event": "cluster-up"}') clusterUp = true;
        const ready = /^\{"event": "driver-ready", "pid": (\d+)\}$/.exec(line);
        if (ready) driverPid = Number(ready[1]);
      });
    await eventually('the Ray cluster up', () => clusterUp || undefined, 240_000).catch(dumpAndThrow);
    await job.supervisor.launchJob(jobId, machines);
    await eventually('every agent registered', () => (agents.size === machines.length ? true : undefined), 60_000);
    writeFileSync(`${machinesFile}.tmp`, JSON.stringify(machines.map((m) => ({ machineId: m.machineId, agentUrl: agents.get(m.machineId), role: m.role }))));
    renameSync(`${machinesFile}.tmp`, machinesFile);
    await eventually('the driver started every worker', () => driverPid, 180_000).catch(dumpAndThrow);
    // Past the first iteration, where any fault would restart the task (paper §5.1.2 rule 1).
    for (const id of ['trainer-0', 'trainer-1'])
      await waitFor('CheckpointSaved', `${id}'s checkpoint of step 1`, (m) => m.data.step === 1 && m.source === `agent/${id}`);
  }, 600_000);

  afterAll(async () => {
    await job.close(async () => {
      if (!driver || driver.exitCode !== null || driver.signalCode !== null) return;
      await new Promise<void>((done) => {
        const force = setTimeout(() => driver!.kill('SIGKILL'), 30_000);
        driver!.once('exit', () => (clearTimeout(force), done()));
        driver!.kill('SIGTERM');
      });
    });
    rmSync(dir, { recursive: true, force: true });
  });

  it('first launch: each trainer actor on its machine’s Ray node, ranked by the agents’ group; one rollout actor', () => {
    const first = ledger();
    expect(places(first.filter((l) => l.role === 'trainer'))).toEqual([
      'trainer-0 rank 0/4 local 0',
      'trainer-0 rank 1/4 local 1',
      'trainer-1 rank 2/4 local 0',
      'trainer-1 rank 3/4 local 1',
    ]);
    expect(first.filter((l) => l.role === 'rollout').map((l) => l.machine)).toEqual(['rollout-0']);
    // Three machines, three Ray nodes: each machine's actors share one node, no two machines do.
    const nodeOf = new Map<string, Set<string>>();
    for (const l of first) nodeOf.set(l.machine, (nodeOf.get(l.machine) ?? new Set()).add(l.node));
    expect([...nodeOf.values()].map((s) => s.size)).toEqual([1, 1, 1]);
    expect(new Set([...nodeOf.values()].map((s) => [...s][0])).size).toBe(3);
  });

  it('a trainer actor killed → reported, robustrl restarts the trainer group, the group replaces both machines’ trainer actors at the step to retry; the rollout actor and the driver stay', async () => {
    const before = ledger();
    const rollout = before.find((l) => l.role === 'rollout')!;
    const victim = before.find((l) => l.machine === 'trainer-1' && l.local === 1)!;
    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');

    // The dead actor (process-exited, reported by the group) or first a peer whose collective broke.
    const signal = await waitFor('AgentFaultSignalled', 'the fault reported', (m) => ['process-exited', 'step-exception'].includes(m.data.signal));
    if (signal.data.signal === 'process-exited') expect(signal.data.detail).toMatch(/^Ray trainer worker \d on trainer-\d died/);
    const decision = await waitFor('RecoveryDecided', 'group restart decided', (m) => m.data.action === 'restart-trainer-group');
    expect(decision.data.rule).toBe('trainer-fault');
    const restart = await waitFor('RestartTrainerGroup', 'the group restart', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(restart.data.machines).toEqual(['trainer-0', 'trainer-1']);
    const completed = await waitFor('RecoveryCompleted', 'recovered', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(completed.data.outcome).toBe('recovered');
    expect(all('RestartTask')).toEqual([]);

    const pidsBefore = new Set(before.map((l) => l.pid));
    const relaunched = await eventually('four trainer actors relaunched', () => {
      const fresh = ledger().filter((l) => !pidsBefore.has(l.pid) && l.role === 'trainer');
      return fresh.length >= 4 ? fresh : undefined;
    });
    expect(relaunched.map((l) => l.step)).toEqual([restart.data.step, restart.data.step, restart.data.step, restart.data.step]);
    expect(places(relaunched)).toEqual([
      'trainer-0 rank 0/4 local 0',
      'trainer-0 rank 1/4 local 1',
      'trainer-1 rank 2/4 local 0',
      'trainer-1 rank 3/4 local 1',
    ]);
    // On the same machines' nodes as before.
    for (const l of relaunched) expect(l.node).toBe(before.find((b) => b.machine === l.machine)!.node);
    expect(ledger().filter((l) => l.role === 'rollout' && l.pid !== rollout.pid)).toEqual([]);
    expect(() => process.kill(rollout.pid, 0)).not.toThrow();
    expect(driver!.exitCode).toBeNull();
    await waitFor('TrainingStepCompleted', 'training continues', (m) => m.data.step >= restart.data.step && Date.parse(m.occurredAt) > killedAt);
  });

  it('the rollout actor killed → reported, robustrl restarts the engine in place, the group replaces the rollout actor on its node; the trainers and the driver stay', async () => {
    const before = ledger();
    const rollout = before.filter((l) => l.role === 'rollout').at(-1)!;
    const trainers = new Set(before.filter((l) => l.role === 'trainer').map((l) => l.pid));
    const groupRestarts = all('RestartTrainerGroup').length;
    process.kill(rollout.pid, 'SIGKILL');

    const signal = await waitFor('AgentFaultSignalled', 'the rollout actor reported', (m) => m.data.machineId === 'rollout-0');
    expect(signal.data.signal).toBe('process-exited');
    expect(signal.data.detail).toMatch(/^Ray rollout worker 0 on rollout-0 died/);
    const decision = await waitFor('RecoveryDecided', 'engine restart decided', (m) => m.data.machineId === 'rollout-0');
    expect(decision.data.action).toBe('restart-rollout-engine');
    const completed = await waitFor('RecoveryCompleted', 'recovered', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(completed.data.outcome).toBe('recovered');

    const replaced = await eventually('a new rollout actor', () => ledger().find((l) => l.role === 'rollout' && l.pid !== rollout.pid));
    expect(replaced.node).toBe(rollout.node);
    const liveTrainers = [...trainers].filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
    // The trainer actors of the last group restart are the ones running, and no group restart since.
    expect(liveTrainers.length).toBe(4);
    expect(all('RestartTrainerGroup').length).toBe(groupRestarts);
    expect(all('RestartTask')).toEqual([]);
    expect(driver!.exitCode).toBeNull();
  });
});
