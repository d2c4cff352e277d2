import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

// The native module's own suite (node:test: test/ucx.test.mjs and one test/transport-*.test.mjs per transport
// selection, each file in a process of its own) runs two-process transfers against the real UCX that
// `deploy/local/ucx.sh ensure` installs before `npm test`. It runs from here so a broken addon fails
// `npm test` like any other test. It needs the compiled facade (dist/), which `npm test` builds first.
const PACKAGE_DIR = join(__dirname, '..');
const SUITE_FILES = readdirSync(__dirname)
  .filter((f) => f.endsWith('.test.mjs'))
  .sort()
  .map((f) => `test/${f}`);

describe('native UCX module (native/ucx, node --test against real UCX)', () => {
  it('passes its suite', () => {
    const result = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...SUITE_FILES], {
      cwd: PACKAGE_DIR,
      encoding: 'utf8',
      timeout: 240_000,
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    const output = `${result.stdout}${result.stderr}`;
    if (result.status !== 0) throw new Error(`node --test exited with ${result.status ?? result.signal}:\n${output.slice(-20_000)}`);
    const count = (name: string) => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(output)?.[1] ?? NaN);
    expect(count('pass')).toBeGreaterThan(20);
    expect(count('fail')).toBe(0);
  }, 300_000);
});
