import { spawn } from 'node:child_process';
import { ProcessCpuSource } from './process-cpu-source';

describe('the process-cpu activity source (a stand-in for GPUs: the role processes’ CPU time)', () => {
  it('is the CPU seconds the tree used per wall second, per GPU, counting a new process from zero', async () => {
    let now = 0;
    const used = new Map<number, number>([[10, 5]]);
    const source = new ProcessCpuSource({ gpus: 2, now: () => now, cpuSeconds: (pid) => used.get(pid) ?? null, processes: () => [...used.keys()] });
    now = 10_000;
    used.set(10, 13); // 8 s of CPU in 10 s
    used.set(11, 2); // started within the window
    expect((await source.sample()).tensorActive).toBeCloseTo(0.5); // (8 + 2) / 10 / 2
    now = 20_000;
    used.delete(10); // exited: its last window's time is lost, never invented
    expect((await source.sample()).tensorActive).toBe(0);
  });

  it('reads a busy child as active and a sleeping one as idle (real /proc)', async () => {
    // The roots stand for agents: what counts is what runs below them.
    const busyRoot = spawn('sh', ['-c', 'sh -c "while :; do :; done" & wait'], { stdio: 'ignore', detached: true });
    const idleRoot = spawn('sh', ['-c', 'sleep 30 & wait'], { stdio: 'ignore', detached: true });
    try {
      await new Promise((r) => setTimeout(r, 200));
      const busy = new ProcessCpuSource({ gpus: 1, root: busyRoot.pid });
      const idle = new ProcessCpuSource({ gpus: 1, root: idleRoot.pid });
      await new Promise((r) => setTimeout(r, 1_000));
      expect((await busy.sample()).tensorActive).toBeGreaterThan(0.2);
      expect((await idle.sample()).tensorActive).toBeLessThan(0.05);
    } finally {
      for (const root of [busyRoot, idleRoot]) process.kill(-root.pid!, 'SIGKILL');
    }
  });

  it('refuses a machine without GPUs to divide by', () => {
    expect(() => new ProcessCpuSource({ gpus: 0 })).toThrow(/gpus must be positive/);
  });
});
