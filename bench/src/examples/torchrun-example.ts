import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { MessageOf, Topics } from '@robustrl/contracts';
import { MachineSpec } from '@robustrl/orchestrator';
import { announceJob, projectPython, REPO, runExample, say, startExamplePlane, story } from './example-plane';

/**
 * `npm run example:torchrun` (docs/integrators/integrate-your-job.md, examples/torchrun/README.md): a real torchrun
 * job under robustrl on this machine, CPU only. Two trainer "machines", each a robustrl agent in cooperate
 * mode and `python -m robustrl.torchrun --nproc-per-node 2` running examples/torchrun/train.py (DDP over
 * gloo, four processes in all); the detector and controller in this process on a Kafka broker and a
 * PostgreSQL server of the run's own (deploy/local). At `--kill-at` a worker is killed with SIGKILL:
 * its launcher reports the failed torchrun, robustrl restarts the trainer group, both launchers run
 * torchrun again with the same ranks from the last checkpoint, and the job finishes its `--steps`.
 * Stand-ins: the machines share this host; the "GPU activity" is what the script reports.
 */
const TRAIN = join(REPO, 'examples', 'torchrun', 'train.py');

interface Options {
  steps: number;
  killAt: number;
  nprocPerNode: number;
}

function options(argv: string[]): Options {
  const o: Options = { steps: 30, killAt: 8, nprocPerNode: 2 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], Number(argv[i + 1])];
    if (!Number.isInteger(value) || value < 1) throw new Error(`${flag} needs a whole number ≥ 1, got ${argv[i + 1]}`);
    if (flag === '--steps') o.steps = value;
    else if (flag === '--kill-at') o.killAt = value;
    else if (flag === '--nproc-per-node') o.nprocPerNode = value;
    else throw new Error(`unknown option ${flag} (--steps N, --kill-at STEP, --nproc-per-node N)`);
  }
  if (o.killAt < 2 || o.killAt >= o.steps - 2) throw new Error(`--kill-at must be in 2..${o.steps - 3}: past the first iteration, before the end`);
  return o;
}

async function main(): Promise<number> {
  const o = options(process.argv.slice(2));
  const started = Date.now();
  const since = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const python = projectPython('torch');
  const plane = await startExamplePlane('example-torchrun', { ROBUSTRL_GPUS: String(o.nprocPerNode) });
  const { infra, supervisor, bus } = plane;
  const jobId = `torchrun-${randomBytes(3).toString('hex')}`;
  const ckptDir = join(infra.dir, 'checkpoints');
  mkdirSync(ckptDir);
  const launchers = new Map<string, ChildProcess>();
  const workers = new Map<number, { pid: number; machine: string }>();
  let killed: { at: number; step: number } | null = null;
  const exitCodes = new Map<string, number | null>();
  const done = new Promise<void>((finish) => {
    const launch = (m: MessageOf<'MachineRegistered'>) => {
      const { machineId, agentAddress } = m.data;
      if (launchers.has(machineId) || !agentAddress) return;
      say(`${machineId}: agent registered at ${agentAddress}; starting its launcher (python -m robustrl.torchrun --nproc-per-node ${o.nprocPerNode})`);
      const child = spawn(
        python,
        ['-m', 'robustrl.torchrun', '--nproc-per-node', String(o.nprocPerNode), '--', TRAIN, '--steps', String(o.steps), '--ckpt-dir', ckptDir],
        {
          env: { ...process.env, PYTHONPATH: join(REPO, 'clients', 'python'), ROBUSTRL_AGENT_URL: agentAddress, OMP_NUM_THREADS: '1', PYTHONUNBUFFERED: '1' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      launchers.set(machineId, child);
      for (const stream of [child.stdout!, child.stderr!])
        createInterface({ input: stream }).on('line', (line) => {
          const worker = /^\[train\] rank (\d+)\/\d+ pid (\d+)/.exec(line);
          if (worker) workers.set(Number(worker[1]), { pid: Number(worker[2]), machine: machineId });
          if (line.startsWith('[train]') || line.startsWith('[robustrl.torchrun]')) process.stdout.write(`  ${machineId} | ${line}\n`);
        });
      child.on('exit', (code) => {
        exitCodes.set(machineId, code);
        if (exitCodes.size === 2) finish();
      });
    };
    void bus.subscribe({
      groupId: `example-${jobId}`,
      topics: Object.values(Topics),
      handler: async ({ message }) => {
        if (message.jobId !== jobId) return;
        if (message.type === 'MachineRegistered') launch(message);
        const line = story(message, 'the launcher');
        if (line) say(`${since()}  ${line}`);
        if (message.type === 'CheckpointSaved' && message.data.step === o.killAt && !killed && message.source === 'agent/trainer-1') {
          const victim = [...workers.entries()].find(([rank]) => rank === 2 * o.nprocPerNode - 1) ?? [...workers.entries()].at(-1);
          if (!victim) return;
          killed = { at: Date.now(), step: o.killAt };
          say(`${since()}  FAULT: kill -9 worker rank ${victim[0]} (pid ${victim[1].pid}) on ${victim[1].machine}`);
          process.kill(victim[1].pid, 'SIGKILL');
        }
      },
    });
  });
  await announceJob(bus, jobId, 0);
  const machines: MachineSpec[] = ['trainer-0', 'trainer-1'].map((machineId) => ({ machineId, role: 'trainer', zone: 'local', hardwareClass: 'cpu' }));
  say(`job ${jobId}: ${o.steps} steps, 2 machines × ${o.nprocPerNode} processes; a worker is killed after step ${o.killAt}`);
  await supervisor.launchJob(jobId, machines);
  let code = 1;
  try {
    await done;
    const ok = [...exitCodes.values()].every((c) => c === 0);
    say(
      `${since()}  ${ok ? 'the job finished: both launchers exited 0' : `the job failed: launcher exit codes ${JSON.stringify(Object.fromEntries(exitCodes))}`}`,
    );
    code = ok ? 0 : 1;
  } finally {
    for (const child of launchers.values()) if (child.exitCode === null) child.kill('SIGTERM');
    await plane.close();
  }
  return code;
}

runExample(main);
