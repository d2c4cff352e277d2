import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mainJobScenario } from '@robustrl/sim';
import { runSimulateCommand, UsageError } from './simulate-command';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t) }, out, err };
}

describe('robustrl simulate', () => {
  let dir: string;
  let file: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'robustrl-simulate-'));
    file = join(dir, 'short.json');
    writeFileSync(file, JSON.stringify({ ...mainJobScenario(3), name: 'short' }));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('--list names the built-in scenarios', async () => {
    const c = capture();
    await runSimulateCommand({ list: true }, c.io);
    expect(c.out.join('\n')).toMatch(/^qwen3-8b-math-semi-sync\s+Qwen3-8B DAPO-Math GRPO, semi-sync/m);
    expect(c.out.join('\n')).toMatch(/^main-job\s/m);
  });

  it('runs a scenario file and prints the comparison table', async () => {
    const c = capture();
    await runSimulateCommand({ scenario: file, strategies: 'none,task-restart,robustrl', seed: '3' }, c.io);
    const table = c.out.join('\n');
    expect(table).toMatch(/^short: Qwen3-8B math, semi-sync, 48 GPUs, 3 steps, seed 3/);
    for (const s of ['none', 'task-restart', 'robustrl']) expect(table).toMatch(new RegExp(`^${s}\\s+[\\d.]+ h\\s+[\\d.]+ %`, 'm'));
    expect(table).toMatch(/robustrl vs task-restart: -?[\d.]+ % less end-to-end time/);
  });

  it('--json prints one object with the per-strategy fields; --out writes it and the charts', async () => {
    const c = capture();
    const out = join(dir, 'out');
    await runSimulateCommand({ scenario: file, strategies: 'robustrl', json: true, out }, c.io);
    const report = JSON.parse(c.out.join('\n'));
    const [r] = report.strategies;
    for (const key of ['wallClockSeconds', 'ettr', 'faults', 'restarts', 'lostRolloutSeconds', 'slidingEttr', 'downtimeLedger']) expect(r).toHaveProperty(key);
    expect(JSON.parse(readFileSync(join(out, 'short.json'), 'utf8'))).toEqual(report);
    for (const svg of ['sliding-ettr-short.svg', 'end-to-end-time.svg', 'restart-breakdown.svg']) expect(existsSync(join(out, svg))).toBe(true);
  });

  it('says what is wrong with bad arguments', async () => {
    const c = capture();
    await expect(runSimulateCommand({}, c.io)).rejects.toThrow(
      new UsageError('--scenario <name|file.json> (or --all) is required (robustrl simulate --list shows the built-in ones)'),
    );
    await expect(runSimulateCommand({ scenario: 'nope' }, c.io)).rejects.toThrow(/no built-in scenario 'nope'/);
    await expect(runSimulateCommand({ scenario: file, strategies: 'robustrl,magic' }, c.io)).rejects.toThrow(/unknown strategy magic/);
    await expect(runSimulateCommand({ scenario: file, seed: '-1' }, c.io)).rejects.toThrow(/--seed must be an integer/);
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, JSON.stringify({ ...mainJobScenario(3), steps: -4 }));
    await expect(runSimulateCommand({ scenario: broken }, c.io)).rejects.toThrow(
      /broken\.json is not a valid simulation scenario:\n {2}steps: [\s\S]*schemas\/simulation\/scenario\.schema\.json/,
    );
    const notJson = join(dir, 'x.json');
    writeFileSync(notJson, '{');
    await expect(runSimulateCommand({ scenario: notJson }, c.io)).rejects.toThrow(/x\.json is not JSON/);
  });
});
