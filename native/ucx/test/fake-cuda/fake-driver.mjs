// Builds test/fake-cuda/fake-libcuda.c (a stand-in for libcuda.so.1, see its header) once per content
// into the OS temp directory and returns its path, or null with why (no C compiler).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function fakeCudaDriver() {
  const source = new URL('./fake-libcuda.c', import.meta.url).pathname;
  const digest = createHash('sha256').update(readFileSync(source)).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), 'robustrl-fake-cuda');
  const out = join(dir, `fake-libcuda-${digest}.so`);
  if (existsSync(out)) return { path: out };
  mkdirSync(dir, { recursive: true });
  const partial = `${out}.${process.pid}.tmp`;
  const cc = process.env.CC || 'cc';
  const r = spawnSync(cc, ['-shared', '-fPIC', '-O1', '-o', partial, source], { encoding: 'utf8' });
  if (r.status !== 0) return { path: null, why: `${cc} could not build the fake CUDA driver: ${r.error?.message ?? r.stderr}` };
  renameSync(partial, out);
  return { path: out };
}

// `node fake-driver.mjs`: builds it and prints its path (how the agent's jest specs get it).
if (process.argv[1] === new URL(import.meta.url).pathname) {
  const built = fakeCudaDriver();
  if (!built.path) {
    process.stderr.write(`${built.why}\n`);
    process.exit(1);
  }
  process.stdout.write(built.path);
}
