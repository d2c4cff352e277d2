import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { createMessage, RobustrlMessage, Topics } from '@robustrl/contracts';
import { MachineSpec } from '@robustrl/orchestrator';
import {
  CampaignPlane,
  startCampaignPlane,
  stopCampaignPlane,
  campaignTimings,
  DEFAULT_TIME_SCALE,
  readGrpoLedger,
  Partitions,
  PrivateInfra,
} from '@robustrl/harness';
import { projectPythonAndModel, REPO, runExample, say, story } from './example-plane';
import { rayJobChecks } from './ray-job-checks';

/**
 * `npm run example:ray` (docs/integrators/integrate-your-job.md, examples/ray/README.md): the real GRPO job
 * (examples/grpo: PyTorch trainer ranks, vLLM engines) as a Ray job under robustrl, on this machine, CPU
 * only. examples/ray/job.py starts a real Ray cluster of three nodes (two trainer machines, one rollout
 * machine) and keeps its actors in robustrl's elastic worker group; each machine has a robustrl agent in
 * cooperate mode; the whole control plane (detector, controller, request manager, router, weight
 * registry) runs as processes on a Kafka broker and a PostgreSQL server of the run's own (deploy/local).
 * After step `--kill-at` a trainer actor is killed with SIGKILL (robustrl restarts the trainer group,
 * which resumes from the checkpoint it names), after step `--kill-rollout-at` the engine actor (robustrl
 * restarts that engine; the group replaces the actor, whose new engine is loaded with the newest version
 * by its agent). The driver never restarts, and the job finishes its `--steps`; the job's own ledger is
 * then checked (ray-job-checks.ts). Stand-ins: the machines are Ray nodes of this host.
 */
const JOB = join(REPO, 'examples', 'ray', 'job.py');
const PROMPTS = 8;
const GROUP = 8;
const MAX_STALENESS = 1;

interface Options {
  steps: number;
  killAt: number;
  killRolloutAt: number;
  nproc: number;
  /** Where the job's state (checkpoints, its ledger) is kept: the run's own folder, removed at the end, when not given. */
  stateDir: string | null;
}

function options(argv: string[]): Options {
  const o: Options = { steps: 14, killAt: 4, killRolloutAt: 9, nproc: 2, stateDir: null };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    if (flag === '--state-dir') {
      if (!argv[i + 1]) throw new Error('--state-dir needs a folder');
      o.stateDir = resolve(argv[i + 1]!);
      continue;
    }
    const value = Number(argv[i + 1]);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${flag} needs a whole number ≥ 1, got ${argv[i + 1]}`);
    if (flag === '--steps') o.steps = value;
    else if (flag === '--kill-at') o.killAt = value;
    else if (flag === '--kill-rollout-at') o.killRolloutAt = value;
    else if (flag === '--nproc') o.nproc = value;
    else throw new Error(`unknown option ${flag} (--steps N, --kill-at STEP, --kill-rollout-at STEP, --nproc RANKS, --state-dir DIR)`);
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

const MACHINES: MachineSpec[] = [
  { machineId: 'trainer-0', role: 'trainer', zone: 'local', hardwareClass: 'cpu' },
  { machineId: 'trainer-1', role: 'trainer', zone: 'local', hardwareClass: 'cpu' },
  // Another zone: the rollout is never lent as a warm standby in this example.
  { machineId: 'rollout-0', role: 'rollout', zone: 'other', hardwareClass: 'cpu' },
];

async function main(stopped: AbortSignal): Promise<number> {
  const o = options(process.argv.slice(2));
  const started = Date.now();
  const since = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const { python, model } = projectPythonAndModel('vLLM, Ray and torch');
  const infra = await PrivateInfra.create();
  const jobId = `ray-${randomBytes(3).toString('hex')}`;
  const stateDir = o.stateDir ?? join(infra.dir, 'job');
  const shmDir = join(infra.dir, 'shm');
  const logDir = join(infra.dir, 'logs');
  for (const dir of [stateDir, shmDir, logDir]) mkdirSync(dir, { recursive: true });
  const timings = campaignTimings(DEFAULT_TIME_SCALE);
  const agents = new Map<string, string>();
  const seen: RobustrlMessage[] = [];
  const plane: Partial<CampaignPlane> & Pick<CampaignPlane, 'services'> = { services: new Map() };
  let driver: ChildProcess | undefined;
  let driverExit: Promise<number | null> = Promise.resolve(null);
  let ok = false;
  try {
    await startCampaignPlane(
      {
        infra,
        hosts: null,
        partitions: new Partitions(null),
        logDir,
        jobId,
        timings,
        policy: 'role-based',
        progress: (line) => say(`${since()}  ${line}`),
        agentEnv: (m, common) => ({
          ...(common as Record<string, string>),
          ROBUSTRL_JOB_ID: m.jobId,
          ROBUSTRL_MACHINE_ID: m.machineId,
          ROBUSTRL_ROLE: m.role,
          ROBUSTRL_ZONE: m.zone,
          ROBUSTRL_HARDWARE_CLASS: m.hardwareClass,
          ROBUSTRL_AGENT_PORT: '0',
          ROBUSTRL_INTEGRATION: 'cooperate',
          ROBUSTRL_TRAINER_WORLD_SIZE: '2',
          ROBUSTRL_RENDEZVOUS_PORT: String(plane.ports!.rendezvous),
          ROBUSTRL_AGENT_LEASE_SECONDS: String(timings.leaseSeconds),
          ROBUSTRL_REQUEST_MANAGER_URL: `http://127.0.0.1:${plane.ports!.http['request-manager']}`,
          // The engine actors' vLLM servers, told to the agent by the actor (PUT /v1/engines), get every version.
          ROBUSTRL_ENGINE_WEIGHTS: 'vllm',
          ROBUSTRL_WEIGHTS_PORT: '0',
          ROBUSTRL_WEIGHTS_SHM_DIR: shmDir,
          ROBUSTRL_GPU_SOURCE: 'emulated',
          ROBUSTRL_GPU_SAMPLE_SECONDS: '1',
        }),
        machineLine: () => undefined,
        observe: () => undefined,
      },
      plane,
    );
    const routerUrl = `http://127.0.0.1:${plane.ports!.router}`;
    const requestManagerUrl = `http://127.0.0.1:${plane.ports!.http['request-manager']}`;
    const machinesFile = join(infra.dir, 'machines.json');

    // The Ray cluster first, as a cluster is up before a job is launched on it.
    say(`${since()}  the driver starts a Ray cluster of three nodes (examples/ray/job.py)`);
    const trainers = new Map<number, number>();
    let rolloutPid: number | undefined;
    let clusterUp = false;
    driver = spawn(python, [JOB, '--machine-ids', MACHINES.map((m) => m.machineId).join(','), '--machines', machinesFile, '--nproc', String(o.nproc)], {
      env: {
        ...process.env,
        OMP_NUM_THREADS: '1',
        PYTHONUNBUFFERED: '1',
        PYTHONDONTWRITEBYTECODE: '1',
        ROBUSTRL_WEIGHTS_SHM_DIR: shmDir,
        ROBUSTRL_GRPO_STATE_DIR: stateDir,
        ROBUSTRL_GRPO_MODEL_DIR: model,
        ROBUSTRL_GRPO_STEPS: String(o.steps),
        ROBUSTRL_GRPO_PROMPTS_PER_STEP: String(PROMPTS),
        ROBUSTRL_GRPO_GROUP_SIZE: String(GROUP),
        ROBUSTRL_GRPO_MAX_STALENESS: String(MAX_STALENESS),
        ROBUSTRL_GRPO_EVAL_EVERY: String(o.steps),
        ROBUSTRL_GRPO_BATCHES: 'robustrl',
        ROBUSTRL_GRPO_PUBLISH: 'agent',
        ROBUSTRL_GRPO_JOB_ID: jobId,
        ROBUSTRL_GRPO_ROUTER_URL: routerUrl,
        ROBUSTRL_GRPO_REQUEST_MANAGER_URL: requestManagerUrl,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = driver;
    driverExit = new Promise<number | null>((done) => exited.once('exit', (code) => done(code)));
    const driverLog = join(logDir, 'driver.log');
    for (const stream of [driver.stdout!, driver.stderr!])
      createInterface({ input: stream }).on('line', (raw) => {
        const line = raw.replace(ANSI_COLOUR, '');
        writeFileSync(driverLog, line + '\n', { flag: 'a' });
        if (line === '{"event": "cluster-up"}') clusterUp = true;
        const trainer = /\[train\] rank (\d+)\/\d+ pid (\d+)/.exec(line);
        if (trainer) trainers.set(Number(trainer[1]), Number(trainer[2]));
        const rollout = /\[rollout\] pid (\d+)/.exec(line);
        if (rollout) rolloutPid = Number(rollout[1]);
        if (/\[(train|rollout|driver)\]|step \d+\/\d+:|robustrl\.ray|Error/.test(line)) process.stdout.write(`  driver | ${line}\n`);
      });
    while (!clusterUp) {
      if (exited.exitCode !== null) throw new Error(`the driver exited (${exited.exitCode}) before its Ray cluster was up (${driverLog})`);
      await new Promise((r) => setTimeout(r, 200));
    }
    say(`${since()}  Ray cluster up`);

    const killed = { trainer: false, rollout: false };
    const bus = plane.bus!;
    await bus.subscribe({
      groupId: `example-${jobId}`,
      topics: Object.values(Topics),
      handler: async ({ message }) => {
        if (message.jobId !== jobId) return;
        seen.push(message);
        if (message.type === 'MachineRegistered' && message.data.agentAddress) agents.set(message.data.machineId, message.data.agentAddress);
        const line = story(message, 'the worker group');
        if (line) say(`${since()}  ${line}`);
        if (message.type !== 'CheckpointSaved' || message.source !== 'agent/trainer-0') return;
        // The last rank (trainer-1's last actor), or the highest one whose line was seen.
        const victim = [...trainers.entries()].sort((a, b) => b[0] - a[0])[0]?.[1];
        if (message.data.step === o.killAt && !killed.trainer && victim) {
          killed.trainer = true;
          say(`${since()}  FAULT: kill -9 a trainer actor (pid ${victim})`);
          process.kill(victim, 'SIGKILL');
        }
        if (message.data.step === o.killRolloutAt && !killed.rollout && rolloutPid) {
          killed.rollout = true;
          say(`${since()}  FAULT: kill -9 the engine actor (pid ${rolloutPid}) on rollout-0`);
          process.kill(rolloutPid, 'SIGKILL');
        }
      },
    });
    await bus.publish(
      createMessage(
        'JobStarted',
        { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 2, rolloutMachines: 1, detection: timings.detection },
        { jobId, source: 'example', occurredAt: new Date().toISOString() },
      ),
    );
    say(
      `job ${jobId}: GRPO, ${o.steps} steps of ${PROMPTS}×${GROUP} samples, 2 trainer machines × ${o.nproc} ranks and a vLLM engine; ` +
        `faults after steps ${o.killAt} and ${o.killRolloutAt}`,
    );
    await plane.supervisor!.launchJob(jobId, MACHINES);
    while (agents.size < MACHINES.length) {
      if (exited.exitCode !== null) throw new Error(`the driver exited (${exited.exitCode}) before every agent registered`);
      await new Promise((r) => setTimeout(r, 200));
    }
    writeFileSync(`${machinesFile}.tmp`, JSON.stringify(MACHINES.map((m) => ({ machineId: m.machineId, agentUrl: agents.get(m.machineId), role: m.role }))));
    renameSync(`${machinesFile}.tmp`, machinesFile);
    const exit = await Promise.race([driverExit, abortedBy(stopped)]);

    const ledger = readGrpoLedger(stateDir);
    const checks = rayJobChecks({ steps: o.steps, batchSize: PROMPTS * GROUP, ranks: 2 * o.nproc, maxStaleness: MAX_STALENESS }, ledger);
    for (const c of checks) say(`check: ${c.ok ? 'held' : 'FAILED'}: ${c.what}: ${c.detail}`);
    const evals = ledger.filter((r) => r.kind === 'eval').map((r) => `step ${r.step}: ${(r.passRate ?? 0).toFixed(2)}`);
    say(`greedy pass rate ${evals.join(', ') || 'not evaluated'}`);
    const count = (type: RobustrlMessage['type']) => seen.filter((m) => m.type === type).length;
    const [groupRestarts, engineRestarts, taskRestarts] = [count('RestartTrainerGroup'), count('RestartRolloutEngine'), count('RestartTask')];
    ok = exit === 0 && killed.trainer && killed.rollout && groupRestarts >= 1 && engineRestarts >= 1 && taskRestarts === 0 && checks.every((c) => c.ok);
    say(
      `${since()}  ${ok ? 'the job finished' : 'the job failed'}: driver exit ${exit}, ${groupRestarts} trainer group restart(s), ${engineRestarts} engine restart(s), ${taskRestarts} task restart(s)`,
    );
    return ok ? 0 : 1;
  } finally {
    if (driver && driver.exitCode === null && driver.signalCode === null) {
      driver.kill('SIGTERM');
      const stubborn = setTimeout(() => driver?.kill('SIGKILL'), 30_000);
      await driverExit;
      clearTimeout(stubborn);
    }
    await stopCampaignPlane(plane);
    if (ok) infra.destroy();
    else {
      infra.stop();
      say(`the run's folder is kept for reading (logs/: the services, the driver): ${infra.dir}`);
    }
  }
}

runExample(main);

/** Rejects once `signal` aborts: what a wait races against so that a stopped example cleans up. */
function abortedBy(signal: AbortSignal): Promise<never> {
  return new Promise((_, fail) => {
    if (signal.aborted) fail(signal.reason);
    signal.addEventListener('abort', () => fail(signal.reason), { once: true });
  });
}
