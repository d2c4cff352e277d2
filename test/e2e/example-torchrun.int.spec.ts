import { runExampleCommand } from './campaign-command';

/**
 * The torchrun example as a user runs it (examples/torchrun/README.md): `node
 * bench/dist/examples/torchrun-example.js`, a child process that must exit 0 by itself, having killed a
 * worker, restarted the trainer group (not the task) and finished every step from the checkpoint.
 */
jest.setTimeout(300_000);

describe('examples/torchrun: one command runs a real torchrun job under robustrl through a fault', () => {
  it('exits 0 after the worker killed at step 4 was recovered by a group restart and the 12 steps finished', async () => {
    const output = await runExampleCommand('torchrun-example.js', ['--steps', '12', '--kill-at', '4'], 280_000);
    expect(output).toMatch(/FAULT: kill -9 worker rank 3/);
    // Reported by the failed torchrun's launcher (process-exited), or first by a peer whose collective broke (step-exception).
    expect(output).toMatch(/trainer-[01] reports (process-exited|step-exception): /);
    expect(output).toMatch(/controller: restart the trainer group \[trainer-0, trainer-1\]/);
    expect(output).toMatch(/recovery recovered/);
    expect(output).not.toMatch(/the whole task restarts/);
    // Both machines ran torchrun again, and the four processes resumed from a checkpoint, not from step 0.
    expect(output.match(/torchrun started \(pid \d+\) as node [01] of 2/g)?.length).toBe(4);
    const resumed = [...output.matchAll(/rank (\d)\/4 pid \d+ \(node \d, local \d\) starts at step (\d+)/g)].filter((m) => Number(m[2]) > 0);
    expect(resumed.map((m) => m[1]).sort()).toEqual(['0', '1', '2', '3']);
    expect(output).toMatch(/step 11 loss/);
    expect(output).toMatch(/the job finished: both launchers exited 0/);
  });
});
