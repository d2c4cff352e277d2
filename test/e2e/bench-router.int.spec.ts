import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * The short version of `npm run bench:router` (bench/src/router/): one-second levels, the engines
 * direct, robustrl's router recording into the trajectory store, and two router replicas following
 * the rollout manager's announced engines — on the real broker and PostgreSQL, built mains as their own
 * processes. The gateways (SGLang's, smg) are the benchmark's own business: installing them is not
 * the tests'. Throughput is not asserted; what is asserted is that the bench still measures what it
 * says: every request answered, recorded trajectories counted, and the affinity hit rate telling a
 * router that keeps a trajectory on one engine (100 %, across replicas too) from round robin.
 */
jest.setTimeout(5 * 60_000);

interface LevelRun {
  level: { stream: boolean; concurrency: number };
  load: { requests: number; errors: number; errorSamples: string[] };
  affinity: { multiTurnRequests: number; hits: number } | null;
  recorded?: number | null;
}
interface TargetRun {
  target: string;
  workload: string;
  error: string | null;
  levels: LevelRun[];
}

describe('bench:router, short (real Kafka and PostgreSQL, the router and its replicas as processes)', () => {
  let runs: TargetRun[];
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'robustrl-bench-router-'));
    const json = join(dir, 'result.json');
    const args = [
      '--seconds',
      '1',
      '--warmup-seconds',
      '1',
      '--levels',
      's1,s8',
      '--targets',
      'direct,node-passthrough,robustrl-on,robustrl-off-x2',
      '--workloads',
      'multi-turn',
    ];
    await promisify(execFile)(process.execPath, [join(__dirname, '..', '..', 'bench', 'dist', 'router', 'router.bench.js'), ...args, '--json', json], {
      maxBuffer: 64 * 1024 * 1024,
    });
    runs = (JSON.parse(readFileSync(json, 'utf8')) as { runs: TargetRun[] }).runs;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('every configuration started and answered every request', () => {
    expect(runs.map((r) => [r.target, r.error])).toEqual([
      ['direct', null],
      ['node-passthrough', null],
      ['robustrl-on', null],
      ['robustrl-off-x2', null],
    ]);
    for (const run of runs)
      for (const l of run.levels) {
        expect(l.load.errorSamples).toEqual([]);
        expect({ target: run.target, errors: l.load.errors, answered: l.load.requests > 0 }).toEqual({ target: run.target, errors: 0, answered: true });
      }
  });

  it('recording on counts the trajectories it stored', () => {
    const on = runs.find((r) => r.target === 'robustrl-on')!;
    for (const l of on.levels) expect(l.recorded).toBeGreaterThan(0);
  });

  it("the hit rate tells affinity from round robin: robustrl's turns meet their engine, through one router or two replicas", () => {
    const rate = (target: string, concurrency: number) => {
      const a = runs.find((r) => r.target === target)!.levels.find((l) => l.level.concurrency === concurrency)!.affinity!;
      expect(a.multiTurnRequests).toBeGreaterThan(0);
      return a.hits / a.multiTurnRequests;
    };
    for (const c of [1, 8]) {
      expect(rate('robustrl-on', c)).toBe(1);
      expect(rate('robustrl-off-x2', c)).toBe(1);
      expect(rate('direct', c)).toBeLessThan(0.5);
      expect(rate('node-passthrough', c)).toBeLessThan(0.5);
    }
  });
});
