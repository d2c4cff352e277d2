import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const REPO_ROOT = resolve(__dirname, '..', '..');

/** How a failed run began and how it ended: a loop at the end can hide what started it. */
function headAndTail(output: string): string {
  return output.length <= 12_000 ? output : `${output.slice(0, 4_000)}\n[…]\n${output.slice(-8_000)}`;
}

/** How a campaign run as its user command ended: its exit code, and the result it wrote (CHAOS_SCORECARD_JSON). */
export interface CampaignExit<T> {
  code: number | null;
  result: T;
}

/**
 * Runs a campaign as a user runs it — `node bench/dist/<script> <args>` (built by `npm test` before
 * jest) as a child process — and waits for it to exit: a campaign that printed its verdict and then sat
 * there fails here at `timeoutMs`, killed, instead of passing. Its progress goes to this process's stderr.
 */
export async function runCampaignCommand<T>(script: string, args: string[], timeoutMs: number, env: NodeJS.ProcessEnv = {}): Promise<CampaignExit<T>> {
  const dir = mkdtempSync(join(tmpdir(), 'robustrl-campaign-'));
  const json = join(dir, 'scorecard.json');
  try {
    const child = spawn(process.execPath, [join(REPO_ROOT, 'bench', 'dist', script), ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env, CHAOS_SCORECARD_JSON: json },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const code = await new Promise<number | null>((done, fail) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        fail(new Error(`${script} ${args.join(' ')} did not exit within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      child.once('exit', (c) => {
        clearTimeout(timer);
        done(c);
      });
    });
    return { code, result: JSON.parse(readFileSync(json, 'utf8')) as T };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Runs an example as a user runs it — `node bench/dist/examples/<script> <args>` — to its exit, and returns
 * what it printed (stdout and stderr, in order). At `timeoutMs` it is sent SIGTERM, to clean up what it
 * started, and killed `stopGraceMs` later. Throws with the output's head and tail when it does not exit 0:
 * an example checks its own run.
 */
export async function runExampleCommand(script: string, args: string[], timeoutMs: number, stopGraceMs = 15_000): Promise<string> {
  const child = spawn(process.execPath, [join(REPO_ROOT, 'bench', 'dist', 'examples', script), ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((done) => {
    // SIGTERM first: the example cleans up what it started (example-plane.ts runExample); then SIGKILL.
    let stubborn: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      output += `\n[test] no exit within ${timeoutMs / 1000} s: SIGTERM\n`;
      child.kill('SIGTERM');
      stubborn = setTimeout(() => child.kill('SIGKILL'), stopGraceMs);
    }, timeoutMs);
    child.once('exit', (c) => (clearTimeout(timer), clearTimeout(stubborn), done(c)));
  });
  if (code !== 0) throw new Error(`${script} ${args.join(' ')} exited with ${code}:\n${headAndTail(output)}`);
  return output;
}
