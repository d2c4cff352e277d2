import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

  it('installs with pip as the robustrl package (its modules and the torchrun launcher importable elsewhere), at the version pyproject names', () => {
    const work = mkdtempSync(join(tmpdir(), 'robustrl-pip-'));
    try {
      // A copy: building writes build/ and *.egg-info beside the sources. pip builds it as for any user:
      // in isolation, with setuptools and wheel from PyPI.
      cpSync(CLIENT_DIR, join(work, 'src'), { recursive: true, filter: (p) => !p.includes('__pycache__') });
      const pip = spawnSync(
        'python3',
        ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', '--no-deps', '--target', join(work, 'site'), join(work, 'src')],
        { encoding: 'utf8', timeout: 120_000 },
      );
      if (pip.status !== 0) throw new Error(`pip install failed (${pip.status ?? pip.signal}):\n${pip.stdout}${pip.stderr}`);
      const probe = spawnSync(
        'python3',
        ['-c', 'import robustrl, robustrl.cooperate, robustrl.torchrun, robustrl_agent; print(robustrl.__version__, robustrl.__file__)'],
        { cwd: work, encoding: 'utf8', env: { ...process.env, PYTHONPATH: join(work, 'site'), PYTHONDONTWRITEBYTECODE: '1' } },
      );
      if (probe.status !== 0) throw new Error(`import failed:\n${probe.stderr}`);
      const [version, file] = probe.stdout.trim().split(' ');
      expect(file.startsWith(join(work, 'site'))).toBe(true);
      expect(version).toBe(/^version = "([^"]+)"/m.exec(readFileSync(join(CLIENT_DIR, 'pyproject.toml'), 'utf8'))![1]);
      const help = spawnSync('python3', ['-m', 'robustrl.torchrun', '--help'], {
        cwd: work,
        encoding: 'utf8',
        env: { ...process.env, PYTHONPATH: join(work, 'site') },
      });
      expect(help.status).toBe(0);
      expect(help.stdout).toMatch(/--nproc-per-node/);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 150_000);
});
