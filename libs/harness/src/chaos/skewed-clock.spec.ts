import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * The clock the clock-skew fault steps (degraded-faults.ts): preloaded into a process, its `Date` runs
 * the file's offset ahead or behind. Run against the build, as the campaign's agents load it.
 */
describe('skewed clock preload', () => {
  const preload = resolve(__dirname, '..', '..', 'dist', 'chaos', 'skewed-clock.js');
  const nowIn = (offset: string | null): number => {
    const dir = mkdtempSync(join(tmpdir(), 'robustrl-clock-'));
    const file = join(dir, 'offset');
    if (offset !== null) writeFileSync(file, offset);
    const run = spawnSync(
      process.execPath,
      ['--require', preload, '-e', 'console.log(JSON.stringify([Date.now(), new Date().getTime(), new Date(0).getTime()]))'],
      {
        env: { ...process.env, NODE_OPTIONS: '', ROBUSTRL_CHAOS_CLOCK_FILE: file },
        encoding: 'utf8',
      },
    );
    if (run.status !== 0) throw new Error(`node exited ${run.status}: ${run.stderr}`);
    const [now, constructed, epoch] = JSON.parse(run.stdout) as number[];
    expect(epoch).toBe(0); // a date given its time is that time
    expect(Math.abs(constructed - now)).toBeLessThan(1_000);
    return now - Date.now();
  };

  it('runs the file’s offset ahead or behind, and the host’s clock without one', () => {
    expect(nowIn('180000')).toBeGreaterThan(170_000);
    expect(nowIn('-180000')).toBeLessThan(-175_000);
    expect(Math.abs(nowIn(null))).toBeLessThan(5_000);
  });
});
