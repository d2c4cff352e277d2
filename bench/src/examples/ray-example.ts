import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { RobustrlMessage, Topics } from '@robustrl/contracts';
import { MachineSpec } from '@robustrl/orchestrator';
import { announceJob, projectPython, REPO, runExample, say, startExamplePlane, story } from './example-plane';

/**
 * `npm run example:ray` (README "Integrate your job", examples/ray/README.md): a Ray job under robustrl
 * on this machine, CPU only. examples/ray/job.py starts a real Ray cluster of three nodes (two trainer
 * machines, one rollout machine) and keeps its actors in robustrl's elastic worker group; each machine
 * has a robustrl agent in cooperate mode; the detector and controller run in this process on a Kafka
 * broker and a PostgreSQL server of the run's own (deploy/local). After step `--kill-at` a trainer actor
 * is killed with SIGKILL (robustrl restarts the trainer group, which resumes from the last checkpoint),
 * after step `--kill-rollout-at` the rollout actor (robustrl restarts that engine in place); the driver
 * never restarts, and the job finishes its `--steps`. Stand-ins: the machines share this host; the
 * rollout actor generates nothing (it reports throughput); the "GPU activity" is what the trainers report.
 */
const JOB = join(REPO, 'examples', 'ray', 'job.py');

interface Options {
  steps: number;
  killAt: number;
  killRolloutAt: number;
  /** Where every actor appends its place as it starts (job.py's --ledger; for tests). */
  ledger: string | null;
}

function options(argv: string[]): Options {
  const o: Options = { steps: 30, killAt: 8, killRolloutAt: 16, ledger: null };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    if (flag === '--ledger') {
      if (!argv[i + 1]) throw new Error('--ledger needs a file');
      o.ledger = resolve(argv[i + 1]!);
      continue;
    }
    const value = Number(argv[i + 1]);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${flag} needs a whole number ≥ 1, got ${argv[i + 1]}`);
    if (flag === '--steps') o.steps = value;
    else if (flag === '--kill-at') o.killAt = value;
    else if (flag === '--kill-rollout-at') o.killRolloutAt = value;
    else throw new Error(`unknown option ${flag} (--steps N, --kill-at STEP, --kill-rollout-at STEP, --ledger FILE)`);
  }
  for (const [name, at] of [
    ['--kill-at', o.killAt],
    ['--kill-rollout-at', o.killRolloutAt],
  ] as const)
    if (at < 2 || at >= o.steps - 3) throw new Error(`${name} must be in 2..${o.steps - 4}: past the first iteration, before the end`);
  if (Math.abs(o.killAt - o.killRolloutAt) < 4) throw new Error('--kill-at and --kill-rollout-at must be at least 4 steps apart: one fault at a time');
  return o;
}

// Ray colours its actors' prefixes for terminals.
const ANSI_COLOUR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

async function main(): Promise<number> {
  const o = options(process.argv.slice(2));
  const started = Date.now();
  const since = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const python = projectPython('Ray and torch');
  const plane = await startExamplePlane('example-ray');
  const { infra, supervisor, bus } = plane;
  let driver: ChildProcess | undefined;
  let driverExit: Promise<number | null> = Promise.resolve(null);
  try {
    const jobId = `ray-${randomBytes(3).toString('hex')}`;
    const ckptDir = join(infra.dir, 'checkpoints');
    mkdirSync(ckptDir);
    const machinesFile = join(infra.dir, 'machines.json');
    const machines: MachineSpec[] = [
      { machineId: 'trainer-0', role: 'trainer', zone: 'local', hardwareClass: 'cpu' },
      { machineId: 'trainer-1', role: 'trainer', zone: 'local', hardwareClass: 'cpu' },
      // Another zone: the rollout is never lent as a warm standby in this example.
      { machineId: 'rollout-0', role: 'rollout', zone: 'other', hardwareClass: 'cpu' },
    ];

    // The Ray cluster first, as a cluster is up before a job is launched on it.
    say('the driver starts a Ray cluster of three nodes (examples/ray/job.py)');
    const trainers = new Map<number, number>();
    let rolloutPid: number | undefined;
    let clusterUp = false;
    driver = spawn(
      python,
      [
        JOB,
        ...['--machine-ids', machines.map((m) => m.machineId).join(','), '--machines', machinesFile, '--ckpt-dir', ckptDir, '--steps', String(o.steps)],
        ...(o.ledger ? ['--ledger', o.ledger] : []),
      ],
      { env: { ...process.env, PYTHONPATH: join(REPO, 'clients', 'python'), OMP_NUM_THREADS: '1', PYTHONUNBUFFERED: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = driver;
    driverExit = new Promise<number | null>((done) => exited.once('exit', (code) => done(code)));
    for (const stream of [driver.stdout!, driver.stderr!])
      createInterface({ input: stream }).on('line', (line) => {
        if (line === '{"event": "cluster-up"}') clusterUp = true;
        const trainer = /\[train\] rank (\d+)\/\d+ pid (\d+)/.exec(line);
        if (trainer) trainers.set(Number(trainer[1]), Number(trainer[2]));
        const rollout = /\[rollout\] pid (\d+)/.exec(line);
        if (rollout) rolloutPid = Number(rollout[1]);
        if (/\[(train|rollout|driver)\]|robustrl\.ray|Error/.test(line)) process.stdout.write(`  driver | ${line.replace(ANSI_COLOUR, '')}\n`);
      });
    while (!clusterUp) {
      if (exited.exitCode !== null) throw new Error(`the driver exited (${driver.exitCode}) before its Ray cluster was up`);
      await new Promise((r) => setTimeout(r, 200));
    }
    say(`${since()}  Ray cluster up`);

    const agents = new Map<string, string>();
    const seen: RobustrlMessage[] = [];
    const killed = { trainer: false, rollout: false };
    await bus.subscribe({
      groupId: `example-${jobId}`,
      topics: Object.values(Topics),
      handler: async ({ message }) => {
        if (message.jobId !== jobId) return;
        seen.push(message);
        if (message.type === 'MachineRegistered' && message.data.agentAddress) agents.set(message.data.machineId, message.data.agentAddress);
        const line = story(message, 'the worker group');
        if (line) say(`${since()}  ${line}`);
        if (message.type !== 'CheckpointSaved' || message.source !== 'agent/trainer-1') return;
        // The last rank (trainer-1's second actor), or the highest one whose line was seen.
        const victim = trainers.get(3) ?? [...trainers.entries()].sort((a, b) => b[0] - a[0])[0]?.[1];
        if (message.data.step === o.killAt && !killed.trainer && victim) {
          killed.trainer = true;
          say(`${since()}  FAULT: kill -9 a trainer actor (pid ${victim})`);
          process.kill(victim, 'SIGKILL');
        }
        if (message.data.step === o.killRolloutAt && !killed.rollout && rolloutPid) {
          killed.rollout = true;
          say(`${since()}  FAULT: kill -9 the rollout actor (pid ${rolloutPid}) on rollout-0`);
          process.kill(rolloutPid, 'SIGKILL');
        }
      },
    });
    await announceJob(bus, jobId, 1);
    say(`job ${jobId}: ${o.steps} steps, 2 trainer machines × 2 actors and a rollout actor; faults after steps ${o.killAt} and ${o.killRolloutAt}`);
    await supervisor.launchJob(jobId, machines);
    while (agents.size < machines.length) {
      if (exited.exitCode !== null) throw new Error(`the driver exited (${exited.exitCode}) before every agent registered`);
      await new Promise((r) => setTimeout(r, 200));
    }
    writeFileSync(`${machinesFile}.tmp`, JSON.stringify(machines.map((m) => ({ machineId: m.machineId, agentUrl: agents.get(m.machineId), role: m.role }))));
    renameSync(`${machinesFile}.tmp`, machinesFile);
    const exit = await driverExit;
    const groupRestarts = seen.filter((m) => m.type === 'RestartTrainerGroup').length;
    const engineRestarts = seen.filter((m) => m.type === 'RestartRolloutEngine').length;
    const taskRestarts = seen.filter((m) => m.type === 'RestartTask').length;
    const ok = exit === 0 && killed.trainer && killed.rollout && groupRestarts >= 1 && engineRestarts >= 1 && taskRestarts === 0;
    say(
      `${since()}  ${ok ? 'the job finished' : 'the job failed'}: driver exit ${exit}, ${groupRestarts} trainer group restart(s), ${engineRestarts} engine restart(s), ${taskRestarts} task restart(s)`,
    );
    return ok ? 0 : 1;
  } finally {
    if (driver && driver.exitCode === null && driver.signalCode === null) {
      driver.kill('SIGTERM');
      await driverExit;
    }
    await plane.close();
  }
}

runExample(main);
