import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The image's entrypoint (deploy/image/entrypoint.js), run as the image runs it but without a container
 * (the container tier is `npm run test:deploy`): any process by name, the list on a wrong one, a bad
 * setting reported in one line, and SIGTERM draining a service to exit 0. It runs the built services
 * (dist), as the image does.
 */
const ROOT = join(__dirname, '..', '..');
const ENTRYPOINT = join(ROOT, 'deploy', 'image', 'entrypoint.js');

function run(args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [ENTRYPOINT, ...args], { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', timeout: 30_000 });
}

describe('the image entrypoint', () => {
  it('names a main file for every process it lists, and each exists in the build (what the Containerfile COPYs)', () => {
    const table = readFileSync(ENTRYPOINT, 'utf8');
    const mains = [...table.matchAll(/main: '([^']+)'/g)].map((m) => m[1]);
    expect(mains.length).toBeGreaterThanOrEqual(8);
    for (const main of mains) expect({ main, exists: existsSync(join(ROOT, main)) }).toEqual({ main, exists: true });
  });

  it('refuses an unknown process with the list (exit 64), and prints the list on help', () => {
    const wrong = run(['detecter']);
    expect(wrong.status).toBe(64);
    expect(wrong.stderr).toMatch(/unknown process 'detecter'/);
    expect(wrong.stderr).toMatch(/ {2}detector +fault detection/);
    const help = run(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/ {2}weight-registry +weight versions/);
  });

  it('passes the arguments on: the CLI prints a key from the identity secret', () => {
    const r = run(['robustrl', 'identity', 'controller-public-key'], { ROBUSTRL_IDENTITY_SECRET: 'entrypoint-spec-secret-0123456789abcdef' });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('a bad setting stops a service with one line naming it, not a stack trace', () => {
    const r = run(['detector'], { ROBUSTRL_HTTP_HOST: '0.0.0.0', ROBUSTRL_HTTP_PORT: '0' });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^detector failed to start: .*without a token: set ROBUSTRL_HTTP_TOKENS/)]);
  });

  describe('SIGTERM', () => {
    let child: ChildProcess | undefined;
    afterEach(() => child?.kill('SIGKILL'));

    it('drains a running service (bus, then store) and exits', async () => {
      child = spawn(process.execPath, [ENTRYPOINT, 'request-manager'], {
        env: { PATH: process.env.PATH, ROBUSTRL_HTTP_PORT: '0' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
      child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
      const deadline = Date.now() + 30_000;
      while (!/ready \(bus: in-process/.test(out)) {
        if (Date.now() > deadline) throw new Error(`the request manager did not start:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child!.once('exit', (code, signal) => resolve({ code, signal })),
      );
      const sentAt = Date.now();
      child.kill('SIGTERM');
      // Nest re-raises the signal once its shutdown hooks are done (as PID 1 in the image that ends in exit 0).
      expect([
        { code: 0, signal: null },
        { code: null, signal: 'SIGTERM' },
      ]).toContainEqual(await exited);
      expect(Date.now() - sentAt).toBeLessThan(10_000);
      expect(out).toMatch(/shutting down on SIGTERM: closing the bus, then the store[\s\S]*bus and store closed: nothing left in flight/);
    });
  });
});
