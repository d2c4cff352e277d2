import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runExampleCommand } from './campaign-command';

/**
 * The real GRPO job as a Ray job under robustrl, as a user runs it (examples/ray/README.md):
 * `node bench/dist/examples/ray-example.js`, a child process that must exit 0 by itself. Its driver
 * (examples/ray/job.py) starts a real Ray cluster of one node per machine on this host and keeps its
 * actors in `robustrl.ray.ElasticWorkerGroup`: two trainer machines × two GRPO trainer ranks (PyTorch, DDP
 * over gloo, distributed checkpoints, weights published through the agents) and one vLLM engine actor
 * (the agent loads every version it pulls into it); the agent loops run in the driver through robustrl's
 * router. The whole control plane runs on a Kafka broker and a PostgreSQL server of the run's own. After
 * step 4 a trainer actor is killed: robustrl restarts the trainer group, and the group replaces both
 * machines' trainer actors with the same ranks, from the checkpoint robustrl names. After step 9 the engine
 * actor is killed: robustrl restarts that engine, and the group replaces that actor only. The driver never
 * restarts. The job's own ledger (`--state-dir`) says where each actor ran and what was trained.
 */
jest.setTimeout(1_200_000);

interface Line {
  kind: string;
  machine?: string;
  role?: 'trainer' | 'rollout';
  rank?: number;
  world?: number;
  local?: number;
  resumeFrom?: number;
  told?: number | null;
  pid: number;
  node?: string;
  url?: string;
  step?: number;
  passRate?: number;
}

describe('Ray: the real GRPO job in an elastic worker group driven by robustrl (Ray cluster of 3 nodes, torch, vLLM, Kafka, PostgreSQL)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'robustrl-ray-'));
  let output = '';
  let ledger: Line[] = [];
  const actors = (role: 'trainer' | 'rollout') => ledger.filter((l) => l.kind === 'actor' && l.role === role);
  const places = (lines: Line[]) => lines.map((l) => `${l.machine} rank ${l.rank}/${l.world} local ${l.local}`).sort();
  const fourTrainers = ['trainer-0 rank 0/4 local 0', 'trainer-0 rank 1/4 local 1', 'trainer-1 rank 2/4 local 0', 'trainer-1 rank 3/4 local 1'];

  beforeAll(async () => {
    // Stopped at 18 min with a minute to stop its Ray cluster, services, broker and database: within jest's 20.
    output = await runExampleCommand('ray-example.js', ['--steps', '14', '--kill-at', '4', '--kill-rollout-at', '9', '--state-dir', dir], 1_080_000, 60_000);
    ledger = readFileSync(join(dir, 'ledger.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Line);
  }, 1_200_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('first launch: each trainer rank an actor on its machine’s Ray node, ranked by the agents’ group; one engine actor; three machines, three nodes', () => {
    const trainers = actors('trainer');
    expect(places(trainers.slice(0, 4))).toEqual(fourTrainers);
    expect(trainers.slice(0, 4).map((l) => [l.resumeFrom, l.told])).toEqual(Array(4).fill([0, null]));
    const nodeOf = new Map<string, Set<string>>();
    for (const l of ledger) if (l.kind === 'actor') nodeOf.set(l.machine!, (nodeOf.get(l.machine!) ?? new Set()).add(l.node!));
    expect([...nodeOf.keys()].sort()).toEqual(['rollout-0', 'trainer-0', 'trainer-1']);
    // Every actor of a machine, first launch or replacement, on that machine's node; no two machines share one.
    expect([...nodeOf.values()].map((s) => s.size)).toEqual([1, 1, 1]);
    expect(new Set([...nodeOf.values()].map((s) => [...s][0])).size).toBe(3);
  });

  it('a trainer actor killed → reported, the trainer group restarted (not the task), both machines’ actors replaced with the same ranks from robustrl’s checkpoint', () => {
    expect(output).toMatch(/FAULT: kill -9 a trainer actor/);
    expect(output).toMatch(/trainer-[01] reports (process-exited: Ray trainer worker \d on trainer-[01] died|step-exception)/);
    expect(output).toMatch(/controller: restart-trainer-group \(rule trainer-fault\)/);
    const restart = /controller: restart the trainer group \[trainer-0, trainer-1\] at step \d+ from checkpoint (\d+)/.exec(output);
    expect(restart).not.toBeNull();
    const trainers = actors('trainer');
    // Exactly one relaunch of the four: the engine's restart later relaunched no trainer.
    expect(trainers).toHaveLength(8);
    const relaunched = trainers.slice(4);
    expect(places(relaunched)).toEqual(fourTrainers);
    const checkpoint = Number(restart![1]);
    expect(relaunched.map((l) => [l.resumeFrom, l.told])).toEqual(Array(4).fill([checkpoint, checkpoint]));
    expect(relaunched.some((l) => trainers.slice(0, 4).some((f) => f.pid === l.pid))).toBe(false);
    // The job's own record: every rank resumed the checkpoint's exact state (digests), every step trained whole.
    expect(output).toMatch(/check: held: after a restart every rank's parameters and optimizer state equal the checkpoint's/);
    expect(output).toMatch(/check: held: every step 1\.\.14 trained by all 4 ranks on one whole batch/);
  });

  it('the engine actor killed → reported, its engine restarted, the actor replaced on its node; the job finishes on versions robustrl moved, with no task restart', () => {
    expect(output).toMatch(/FAULT: kill -9 the engine actor/);
    expect(output).toMatch(/rollout-0 reports process-exited: Ray rollout worker 0 on rollout-0 died/);
    expect(output).toMatch(/controller: restart-rollout-engine \(rule rollout-process-fault\)/);
    const engines = actors('rollout');
    // The first and its one replacement: the trainer group's restart left the engine actor alone.
    expect(engines).toHaveLength(2);
    expect(engines[1]!.pid).not.toBe(engines[0]!.pid);
    expect(output.match(/recovery recovered/g)?.length).toBe(2);
    expect(output).not.toMatch(/the whole task restarts/);
    expect(output).toMatch(
      /check: held: every trained sample generated within the staleness bound \(1\) by versions the agents loaded: newest version sampled: 1[0-3]/,
    );
    expect(output).not.toMatch(/check: FAILED/);
    expect(ledger.filter((l) => l.kind === 'eval').map((l) => l.step)).toEqual([0, 14]);
    expect(output).toMatch(/the job finished: driver exit 0, 1 trainer group restart\(s\), 1 engine restart\(s\), 0 task restart\(s\)/);
  });
});
