import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

// The Python client (clients/python) is tested with unittest; this runs those tests in the unit tier
// so a broken client fails `npm test` like any other test. Python 3 is part of the base machine, so a
// missing interpreter fails here rather than skipping: a silent skip would hide breakage.
const CLIENT_DIR = join(__dirname, '..', 'clients', 'python');

describe('Python agent client (clients/python)', () => {
  it('passes its unittest suite', () => {
    const result = spawnSync('python3', ['-m', 'unittest', '-v'], {
      cwd: CLIENT_DIR,
      encoding: 'utf8',
      timeout: 60_000,
      // -B's equivalent: no __pycache__ left in the source tree; no agent URL leaking in from the shell.
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ROBUSTRL_AGENT_URL: '' },
    });
    if (result.error) {
      const code = (result.error as NodeJS.ErrnoException).code;
      throw new Error(
        code === 'ENOENT'
          ? 'python3 not found on PATH: the Python client tests need Python 3 (part of the base machine)'
          : `could not run python3 -m unittest in ${CLIENT_DIR}: ${result.error.message}`,
      );
    }
    // unittest reports on stderr.
    const output = `${result.stdout}${result.stderr}`;
    if (result.status !== 0) throw new Error(`python3 -m unittest exited with ${result.status ?? result.signal}:\n${output}`);
    const ran = /^Ran (\d+) tests? in /m.exec(output);
    expect(ran).not.toBeNull();
    expect(Number(ran![1])).toBeGreaterThan(0);
    expect(output).toMatch(/^OK\b/m);
  }, 90_000);
});
