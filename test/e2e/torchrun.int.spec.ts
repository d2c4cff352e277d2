import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createMessage, MessageOf } from '@robustrl/contracts';
import { MachineSpec } from '@robustrl/orchestrator';
import { eventually } from '@robustrl/testing/eventually';
import { CooperatingJob } from './fixtures/cooperating-job';

/**
 * torchrun under robustrl (docs/integrators/integrate-your-job.md): two trainer machines, each an agent in cooperate
 * mode and a launcher (`python -m robustrl.torchrun --nproc-per-node 2`) running real torchrun with two
 * PyTorch processes (gloo on CPU) that all-reduce across all four every step. The launcher gets the
 * machine's node rank, the group's size and rendezvous from its agent — on the first launch and after
 * robustrl restarts the group — and torchrun ranks the processes. Real Kafka, PostgreSQL and torch
 * (deploy/local/vllm.sh's environment).
 */
const REPO = join(__dirname, '..', '..');
const WORKER = join(__dirname, 'fixtures', 'torch_ranks.py');

jest.setTimeout(240_000);

interface LedgerLine {
  machine: string;
  rank: number;
  world: number;
  local: number;
  node: number;
  step: number;
  pid: number;
}

describe('torchrun: 2 machines × 2 processes, ranked by robustrl on the first launch and after a restart (real torch, Kafka, PostgreSQL)', () => {
  const jobId = `job-torchrun-${randomBytes(3).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'robustrl-torchrun-'));
  const ledgerPath = join(dir, 'ledger.jsonl');
  const rendezvousPort = String(20_000 + Math.floor(Math.random() * 20_000));
  let python: string;
  const launchers = new Map<string, ChildProcess>();
  const machines: MachineSpec[] = [
    { machineId: 'trainer-0', role: 'trainer', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    { machineId: 'trainer-1', role: 'trainer', zone: 'az-1', hardwareClass: 'cpu-e2e' },
  ];
  const job = new CooperatingJob('torchrun', jobId, {
    agentEnv: { ROBUSTRL_TRAINER_WORLD_SIZE: '2', ROBUSTRL_RENDEZVOUS_PORT: rendezvousPort },
    commandTimeoutSeconds: 60,
    onRegistered: (m) => startLauncher(m),
  });
  const all: CooperatingJob['all'] = (type, where) => job.all(type, where);
  const waitFor: CooperatingJob['waitFor'] = (type, what, where, timeoutMs = 90_000) => job.waitFor(type, what, where, timeoutMs);
  const ledger = (): LedgerLine[] =>
    readFileSync(ledgerPath, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as LedgerLine);

  /** The machine's launcher, started beside its agent once the agent registered. */
  function startLauncher(registered: MessageOf<'MachineRegistered'>): void {
    const { machineId, agentAddress } = registered.data;
    if (launchers.has(machineId) || !agentAddress) return;
    const child = spawn(python, ['-m', 'robustrl.torchrun', '--nproc-per-node', '2', '--', WORKER], {
      cwd: join(REPO, 'clients', 'python'),
      env: {
        ...process.env,
        PYTHONPATH: join(REPO, 'clients', 'python'),
        ROBUSTRL_AGENT_URL: agentAddress,
        ROBUSTRL_MACHINE_ID: machineId,
        E2E_LEDGER: ledgerPath,
        E2E_STEP_SECONDS: '1',
        OMP_NUM_THREADS: '1',
        PYTHONUNBUFFERED: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    launchers.set(machineId, child);
    for (const stream of [child.stdout!, child.stderr!])
      createInterface({ input: stream }).on('line', (line) => job.output.push(`[${machineId} launcher] ${line}`));
  }

  beforeAll(async () => {
    python = execFileSync('bash', [join(REPO, 'deploy', 'local', 'vllm.sh'), 'status'], { encoding: 'utf8' })
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
          rolloutMachines: 0,
          detection: { trainerIdleWindowSeconds: 30, rolloutSilentWindowSeconds: 5, probeTimeoutSeconds: 3 },
        },
        { jobId, source: 'e2e', occurredAt: new Date().toISOString() },
      ),
    );
    await job.supervisor.launchJob(jobId, machines);
    // Past the first iteration, where any fault would restart the task (paper §5.1.2 rule 1).
    for (const id of ['trainer-0', 'trainer-1'])
      await waitFor('CheckpointSaved', `${id}'s checkpoint of step 0`, (m) => m.data.step === 0 && m.source === `agent/${id}`);
  });

  afterAll(async () => {
    // A stopped launcher stops its torchrun and the workers with it.
    await job.close(() =>
      Promise.all(
        [...launchers.values()].map(
          (child) =>
            new Promise<void>((done) => {
              if (child.exitCode !== null || child.signalCode !== null) return done();
              const force = setTimeout(() => child.kill('SIGKILL'), 20_000);
              child.once('exit', () => (clearTimeout(force), done()));
              child.kill('SIGTERM');
            }),
        ),
      ).then(() => undefined),
    );
    rmSync(dir, { recursive: true, force: true });
  });

  const places = (lines: LedgerLine[]) => lines.map((l) => `${l.machine} node ${l.node} rank ${l.rank}/${l.world} local ${l.local}`).sort();

  it('first launch: each machine gets its node rank from its agent, torchrun ranks its two processes, all four meet', () => {
    const first = ledger().filter((l) => l.step === 0);
    expect(places(first)).toEqual([
      'trainer-0 node 0 rank 0/4 local 0',
      'trainer-0 node 0 rank 1/4 local 1',
      'trainer-1 node 1 rank 2/4 local 0',
      'trainer-1 node 1 rank 3/4 local 1',
    ]);
  });

  it('a worker killed → the failed torchrun (or its broken peer) is reported, robustrl restarts the group, both launchers relaunch with the right ranks at the step to retry', async () => {
    const agentPids = machines.map((m) => job.supervisor.pidOf(m.machineId));
    const before = new Set(ledger().map((l) => l.pid));
    const victim = ledger().find((l) => l.machine === 'trainer-1' && l.local === 1)!;
    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');

    // Whichever reaches the control plane first: the launcher of the failed torchrun (process-exited), or
    // a peer whose collective broke (step-exception). When the peer's report wins, the group restart
    // stops the dying torchrun before it exits and its launcher has nothing left to report; the
    // launcher's own report is covered by clients/python/test_torchrun.py.
    const signal = await waitFor('AgentFaultSignalled', 'the fault reported', (m) => ['process-exited', 'step-exception'].includes(m.data.signal));
    if (signal.data.signal === 'process-exited') expect(signal.data.detail).toMatch(/torchrun \(pid \d+\) exited with code/);
    const decision = await waitFor('RecoveryDecided', 'group restart decided', (m) => m.data.action === 'restart-trainer-group');
    expect(decision.data.rule).toBe('trainer-fault');
    const restart = await waitFor('RestartTrainerGroup', 'the group restart', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(restart.data.machines).toEqual(['trainer-0', 'trainer-1']);
    const completed = await waitFor('RecoveryCompleted', 'recovered', (m) => m.data.recoveryId === decision.data.recoveryId);
    expect(completed.data.outcome).toBe('recovered');
    expect(all('RestartTask')).toEqual([]);

    // Each process writes its line once, as it starts: the lines of processes that were not there before the kill.
    const relaunched = await eventually('four processes relaunched', () => {
      const fresh = ledger().filter((l) => !before.has(l.pid));
      return fresh.length >= 4 ? fresh : undefined;
    });
    expect(relaunched.map((l) => l.step)).toEqual([restart.data.step, restart.data.step, restart.data.step, restart.data.step]);
    expect(places(relaunched)).toEqual([
      'trainer-0 node 0 rank 0/4 local 0',
      'trainer-0 node 0 rank 1/4 local 1',
      'trainer-1 node 1 rank 2/4 local 0',
      'trainer-1 node 1 rank 3/4 local 1',
    ]);
    // The agents restarted nothing themselves, and training goes on.
    expect(machines.map((m) => job.supervisor.pidOf(m.machineId))).toEqual(agentPids);
    await waitFor('TrainingStepCompleted', 'training continues', (m) => m.data.step >= restart.data.step && Date.parse(m.occurredAt) > killedAt);
  });
});
