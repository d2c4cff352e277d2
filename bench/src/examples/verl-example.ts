import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Topics } from '@robustrl/contracts';
import { MachineSpec } from '@robustrl/orchestrator';
import { WeightRegistryModule } from '@robustrl/weight-registry';
import { startVllmEngine, VllmEngine } from '@robustrl/harness';
import { projectPythonAndModel, REPO, runExample, say, startExamplePlane } from './example-plane';

/**
 * `npm run example:verl` (examples/verl/README.md): verl's weight update through robustrl, on this
 * machine, CPU only. verl's own checkpoint-engine registry makes robustrl's backend (`robustrl.verl`) for
 * two actor ranks and a rollout (examples/verl/example.py); each has a robustrl agent (cooperate mode) on
 * a Kafka broker and PostgreSQL of the run's own, the weight registry schedules the pulls, and the
 * rollout's agent loads every version into a real vLLM engine. Each version is checked bit for bit on the
 * rollout and against transformers' answer on the engine. Stand-ins: verl's trainer does not run (its
 * pins conflict with vLLM's, examples/verl/README.md): the weights' change per version is a seeded
 * perturbation of the GRPO example's model, not a training step.
 */
const EXAMPLE = join(REPO, 'examples', 'verl', 'example.py');

const MACHINES: MachineSpec[] = [
  { machineId: 'actor-0', role: 'trainer', zone: 'local', hardwareClass: 'cpu' },
  { machineId: 'actor-1', role: 'trainer', zone: 'local', hardwareClass: 'cpu' },
  { machineId: 'rollout-0', role: 'rollout', zone: 'local', hardwareClass: 'cpu' },
];

function versionsOption(argv: string[]): number {
  if (argv.length === 0) return 3;
  const value = Number(argv[1]);
  if (argv[0] !== '--versions' || argv.length !== 2 || !Number.isInteger(value) || value < 1)
    throw new Error(`usage: verl-example [--versions N] (N ≥ 1, default 3), got ${argv.join(' ')}`);
  return value;
}

async function main(): Promise<number> {
  const versions = versionsOption(process.argv.slice(2));
  const started = Date.now();
  const since = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const { python, model } = projectPythonAndModel('verl, vLLM and torch');
  let engine: VllmEngine | undefined;
  let shmDir = '';
  const plane = await startExamplePlane(
    'example-verl',
    (m) => ({
      ROBUSTRL_WEIGHTS_SHM_DIR: shmDir,
      ...(m.role === 'rollout' ? { ROBUSTRL_ENGINE_WEIGHTS: 'vllm', ROBUSTRL_INFERENCE_URL: engine!.url } : {}),
    }),
    () => [WeightRegistryModule],
  );
  try {
    shmDir = join(plane.infra.dir, 'shm');
    mkdirSync(shmDir);
    say(`${since()}  a vLLM engine for the rollout (the GRPO example's base model)`);
    engine = await startVllmEngine({ id: 'rollout-0', logFile: join(plane.infra.dir, 'engine.log') });
    const jobId = `verl-${randomBytes(3).toString('hex')}`;
    const agents = new Map<string, string>();
    await plane.bus.subscribe({
      groupId: `example-${jobId}`,
      topics: [Topics.membership],
      handler: async ({ message }) => {
        if (message.jobId === jobId && message.type === 'MachineRegistered' && message.data.agentAddress)
          agents.set(message.data.machineId, message.data.agentAddress);
      },
    });
    await plane.supervisor.launchJob(jobId, MACHINES);
    const deadline = Date.now() + 120_000;
    while (agents.size < MACHINES.length) {
      if (Date.now() > deadline) throw new Error(`only ${[...agents.keys()].join(', ') || 'no agent'} registered within 120 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
    say(`${since()}  agents registered: two actor ranks, one rollout; the weight registry schedules their pulls`);
    const child = spawn(
      python,
      [
        EXAMPLE,
        ...['--actor-agents', `${agents.get('actor-0')},${agents.get('actor-1')}`, '--rollout-agent', agents.get('rollout-0')!],
        ...['--engine-url', engine.url, '--model-dir', model, '--shm-dir', shmDir, '--versions', String(versions)],
      ],
      { env: { ...process.env, OMP_NUM_THREADS: '1', PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let tail = '';
    createInterface({ input: child.stdout! }).on('line', (line) => say(`${since()}  ${line}`));
    child.stderr!.on('data', (chunk: Buffer) => (tail = (tail + chunk.toString()).slice(-4000)));
    const code = await new Promise<number | null>((done) => child.once('exit', (c) => done(c)));
    if (code !== 0) process.stderr.write(tail);
    say(`${since()}  ${code === 0 ? 'every version moved through verl’s checkpoint engine and served by the engine' : `example.py exited with ${code}`}`);
    return code === 0 ? 0 : 1;
  } finally {
    engine?.kill();
    await engine?.exited;
    await plane.close();
  }
}

runExample(main);
