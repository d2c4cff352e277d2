import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * Ray under robustrl, as a user runs it (examples/ray/README.md): `node bench/dist/examples/ray-example.js`,
 * a child process that must exit 0 by itself. Its driver (examples/ray/job.py) starts a real Ray cluster of
 * one node per machine on this host and keeps its actors in `robustrl.ray.ElasticWorkerGroup`: two trainer
 * machines × two trainer actors (real torch, DDP over gloo) and one rollout actor (a stand-in engine); each
 * machine has a robustrl agent in cooperate mode on a Kafka broker and a PostgreSQL server of the run's own.
 * After step 6 a trainer actor is killed: robustrl restarts the trainer group, and the group replaces both
 * machines' trainer actors with the same ranks, from the checkpoint it names. After step 14 the rollout
 * actor is killed: robustrl restarts that engine in place, and the group replaces that actor only. The
 * driver never restarts. The actors' ledger (`--ledger`) says where each actor ran and as what.
 */
const REPO = resolve(__dirname, '..', '..');

jest.setTimeout(900_000);

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
  const dir = mkdtempSync(join(tmpdir(), 'robustrl-ray-'));
  const ledgerPath = join(dir, 'ledger.jsonl');
  let output = '';
  let ledger: LedgerLine[] = [];
  const places = (lines: LedgerLine[]) => lines.map((l) => `${l.machine} rank ${l.rank}/${l.world} local ${l.local}`).sort();
  const fourTrainers = ['trainer-0 rank 0/4 local 0', 'trainer-0 rank 1/4 local 1', 'trainer-1 rank 2/4 local 0', 'trainer-1 rank 3/4 local 1'];

  beforeAll(async () => {
    const child = spawn(
      process.execPath,
      [join(REPO, 'bench', 'dist', 'examples', 'ray-example.js'), '--steps', '24', '--kill-at', '6', '--kill-rollout-at', '14', '--ledger', ledgerPath],
      { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((done) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 840_000);
      child.once('exit', (c) => (clearTimeout(timer), done(c)));
    });
    if (code !== 0) throw new Error(`the example exited with ${code}:\n${output.slice(-8000)}`);
    ledger = existsSync(ledgerPath)
      ? readFileSync(ledgerPath, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as LedgerLine)
      : [];
  }, 900_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('first launch: each trainer actor on its machine’s Ray node, ranked by the agents’ group; one rollout actor; three machines, three nodes', () => {
    const trainers = ledger.filter((l) => l.role === 'trainer');
    expect(places(trainers.slice(0, 4))).toEqual(fourTrainers);
    expect(trainers.slice(0, 4).map((l) => l.step)).toEqual([0, 0, 0, 0]);
    const nodeOf = new Map<string, Set<string>>();
    for (const l of ledger) nodeOf.set(l.machine, (nodeOf.get(l.machine) ?? new Set()).add(l.node));
    expect([...nodeOf.keys()].sort()).toEqual(['rollout-0', 'trainer-0', 'trainer-1']);
    // Every actor of a machine, first launch or replacement, on that machine's node; no two machines share one.
    expect([...nodeOf.values()].map((s) => s.size)).toEqual([1, 1, 1]);
    expect(new Set([...nodeOf.values()].map((s) => [...s][0])).size).toBe(3);
  });

  it('a trainer actor killed → reported, the trainer group restarted (not the task), both machines’ trainer actors replaced with the same ranks from the checkpoint', () => {
    expect(output).toMatch(/FAULT: kill -9 a trainer actor/);
    expect(output).toMatch(/trainer-[01] reports (process-exited: Ray trainer worker \d on trainer-[01] died|step-exception)/);
    expect(output).toMatch(/controller: restart-trainer-group \(rule trainer-fault\)/);
    const restart = /controller: restart the trainer group \[trainer-0, trainer-1\] at step \d+ from checkpoint (\d+)/.exec(output);
    expect(restart).not.toBeNull();
    const trainers = ledger.filter((l) => l.role === 'trainer');
    // Exactly one relaunch of the four: the rollout's restart later relaunched no trainer.
    expect(trainers).toHaveLength(8);
    const relaunched = trainers.slice(4);
    expect(places(relaunched)).toEqual(fourTrainers);
    const resumeAt = Number(restart![1]) + 1;
    expect(relaunched.map((l) => l.step)).toEqual([resumeAt, resumeAt, resumeAt, resumeAt]);
    expect(new Set(relaunched.map((l) => l.pid)).size).toBe(4);
    expect(relaunched.some((l) => trainers.slice(0, 4).some((f) => f.pid === l.pid))).toBe(false);
  });

  it('the rollout actor killed → reported, its engine restarted in place, the actor replaced on its node; the job finishes with no task restart', () => {
    expect(output).toMatch(/FAULT: kill -9 the rollout actor/);
    expect(output).toMatch(/rollout-0 reports process-exited: Ray rollout worker 0 on rollout-0 died/);
    expect(output).toMatch(/controller: restart-rollout-engine \(rule rollout-process-fault\)/);
    const rollouts = ledger.filter((l) => l.role === 'rollout');
    // The first and its one replacement: the trainer group's restart left the rollout actor alone.
    expect(rollouts).toHaveLength(2);
    expect(rollouts[1]!.pid).not.toBe(rollouts[0]!.pid);
    expect(output.match(/recovery recovered/g)?.length).toBe(2);
    expect(output).not.toMatch(/the whole task restarts/);
    expect(output).toMatch(/the job finished: driver exit 0, 1 trainer group restart\(s\), 1 engine restart\(s\), 0 task restart\(s\)/);
  });
});
