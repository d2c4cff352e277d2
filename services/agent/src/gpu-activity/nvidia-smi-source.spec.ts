import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GpuActivitySourceError } from './gpu-activity-source';
import { NvidiaSmiSource, parseNvidiaSmiUtilization } from './nvidia-smi-source';

// `nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits` on an 8-GPU node, in
// nvidia-smi's ", "-separated form. Written by hand (no GPU machine was lent to this task to capture
// one); GPU 5 idles at 0 to pin the per-GPU order.
const H100X8 = readFileSync(join(__dirname, 'fixtures', 'nvidia-smi-h100x8.csv'), 'utf8');
const DRIVER_DOWN =
  "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.";

describe('parseNvidiaSmiUtilization', () => {
  it('turns percent per GPU into 0..1 and averages', () => {
    const reading = parseNvidiaSmiUtilization(H100X8);
    expect(reading.perGpu).toEqual([0.97, 0.98, 0.96, 1, 0.97, 0, 0.98, 0.99]);
    expect(reading.tensorActive).toBeCloseTo(0.85625, 9);
  });

  it('orders GPUs by index and tolerates CRLF, spacing and blank lines', () => {
    expect(parseNvidiaSmiUtilization('\r\n 2 ,  50\r\n0,10\r\n\r\n1, 0\r\n').perGpu).toEqual([0.1, 0, 0.5]);
  });

  it('fails on a GPU without a number instead of reading it as idle', () => {
    expect(() => parseNvidiaSmiUtilization('0, 97\n1, [N/A]\n')).toThrow("line 2: GPU 1 utilization '[N/A]' is not a number");
    expect(() => parseNvidiaSmiUtilization('0, [Not Supported]')).toThrow(/GPU 0 utilization '\[Not Supported\]'/);
  });

  it('fails on output that is not the noheader,nounits query', () => {
    expect(() => parseNvidiaSmiUtilization('index, utilization.gpu [%]\n0, 97 %\n')).toThrow("line 1: GPU index 'index' is not a number");
    expect(() => parseNvidiaSmiUtilization('0, 97, 12\n')).toThrow(/line 1: expected 'index, utilization'/);
    expect(() => parseNvidiaSmiUtilization('0, 170\n')).toThrow('line 1: GPU 0 utilization 170% is over 100%');
    expect(() => parseNvidiaSmiUtilization('0, 1\n0, 2\n')).toThrow('line 2: GPU 0 listed twice');
  });

  it('fails when no GPU is listed', () => {
    expect(() => parseNvidiaSmiUtilization('\n')).toThrow('no GPUs listed');
  });
});

describe('NvidiaSmiSource running a fake nvidia-smi', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'robustrl-fake-nvidia-smi-'));
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** Writes an executable shell script standing in for nvidia-smi and returns its path. */
  function fakeNvidiaSmi(name: string, body: string, mode = 0o755): string {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\n${body}\n`);
    chmodSync(path, mode);
    return path;
  }

  it('runs the utilization query and reads its output', async () => {
    // The fake checks its arguments so the test also pins the exact query the source runs.
    const path = fakeNvidiaSmi(
      'ok',
      `[ "$1" = "--query-gpu=index,utilization.gpu" ] && [ "$2" = "--format=csv,noheader,nounits" ] && [ $# -eq 2 ] || { echo "unexpected arguments: $*" >&2; exit 2; }
cat <<'OUT'
${H100X8}OUT`,
    );
    const source = new NvidiaSmiSource({ path });
    expect(source.kind).toBe('nvidia-smi');
    await expect(source.sample()).resolves.toEqual({ tensorActive: expect.closeTo(0.85625, 9), perGpu: [0.97, 0.98, 0.96, 1, 0.97, 0, 0.98, 0.99] });
  });

  it("fails with the command, exit code and nvidia-smi's own explanation when the driver is down", async () => {
    const path = fakeNvidiaSmi('driver-down', `echo "${DRIVER_DOWN}"\nexit 9`);
    const failure = new NvidiaSmiSource({ path }).sample();
    await expect(failure).rejects.toBeInstanceOf(GpuActivitySourceError);
    await expect(failure).rejects.toThrow(
      `nvidia-smi GPU activity source (${path} --query-gpu=index,utilization.gpu --format=csv,noheader,nounits) failed: exit code 9: ${DRIVER_DOWN}`,
    );
  });

  it('fails with the reason when the output has a GPU without a number', async () => {
    const path = fakeNvidiaSmi('na', `printf '0, 97\\n1, [N/A]\\n'`);
    await expect(new NvidiaSmiSource({ path }).sample()).rejects.toThrow(
      /^nvidia-smi GPU activity source \(.*\) failed: line 2: GPU 1 utilization '\[N\/A\]' is not a number$/,
    );
  });

  it('kills a hung nvidia-smi after its timeout', async () => {
    const path = fakeNvidiaSmi('hangs', 'exec sleep 30');
    const started = Date.now();
    await expect(new NvidiaSmiSource({ path, timeoutMs: 200 }).sample()).rejects.toThrow(/failed: no answer within 200 ms \(killed with SIGTERM\)$/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('fails clearly when the executable is missing or not executable', async () => {
    const missing = join(dir, 'no-such-nvidia-smi');
    await expect(new NvidiaSmiSource({ path: missing }).sample()).rejects.toThrow(`nvidia-smi GPU activity source (${missing} --query-gpu`);
    await expect(new NvidiaSmiSource({ path: missing }).sample()).rejects.toThrow(/failed: executable not found$/);
    const notExecutable = fakeNvidiaSmi('not-executable', 'echo "0, 1"', 0o644);
    await expect(new NvidiaSmiSource({ path: notExecutable }).sample()).rejects.toThrow(/failed: executable not permitted to run$/);
  });
});
