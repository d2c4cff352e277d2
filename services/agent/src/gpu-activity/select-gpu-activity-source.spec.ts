import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DcgmExporterSource } from './dcgm-exporter-source';
import { EmulatedGpuActivitySource } from './emulated-source';
import { NvidiaSmiSource } from './nvidia-smi-source';
import type { NvmlSample } from '@robustrl/ucx';
import { selectGpuActivitySource } from './select-gpu-activity-source';

const DCGM_SCRAPE = readFileSync(join(__dirname, 'fixtures', 'dcgm-exporter-h100x8.txt'), 'utf8');
// This machine's NVML, whatever it is, must not decide these tests: each selection gets a reader.
const noNvml = { read: (): NvmlSample => ({ available: false, reason: 'no NVML here (test)', devices: [] }) };
const NO_NVML_REASON = 'nvml GPU activity source (NVML) failed: no NVML here (test)';
const NVIDIA_SMI_CSV = readFileSync(join(__dirname, 'fixtures', 'nvidia-smi-h100x8.csv'), 'utf8');

describe('selectGpuActivitySource', () => {
  let dir: string;
  let workingSmi: string;
  let brokenSmi: string;
  let missingSmi: string;
  const servers: Server[] = [];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'robustrl-select-gpu-source-'));
    workingSmi = join(dir, 'nvidia-smi-ok');
    writeFileSync(workingSmi, `#!/bin/sh\ncat <<'OUT'\n${NVIDIA_SMI_CSV}OUT\n`);
    chmodSync(workingSmi, 0o755);
    brokenSmi = join(dir, 'nvidia-smi-broken');
    writeFileSync(brokenSmi, '#!/bin/sh\necho "No devices were found"\nexit 6\n');
    chmodSync(brokenSmi, 0o755);
    missingSmi = join(dir, 'nvidia-smi-missing');
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  afterEach(async () => {
    await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
  });

  /** A fake dcgm-exporter answering every request with `status` and `body`. */
  async function exporter(status: number, body: string): Promise<string> {
    const server = createServer((_req, res) => {
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(body);
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  }

  it('takes dcgm when its exporter answers with the metric', async () => {
    const dcgmUrl = await exporter(200, DCGM_SCRAPE);
    const selection = await selectGpuActivitySource({ nvml: noNvml, dcgmUrl, nvidiaSmiPath: workingSmi });
    expect(selection.source).toBeInstanceOf(DcgmExporterSource);
    expect(selection.source.kind).toBe('dcgm');
    expect(selection.reason).toBe(`dcgm: dcgm-exporter at ${dcgmUrl} answered, 8 GPU(s), mean activity 0.41`);
    expect(selection.passedOver).toEqual([]);
  });

  it('falls back to nvidia-smi when the exporter fails, saying why and that utilization.gpu is coarser', async () => {
    const dcgmUrl = await exporter(500, 'collector crashed');
    const selection = await selectGpuActivitySource({ nvml: noNvml, dcgmUrl, nvidiaSmiPath: workingSmi });
    expect(selection.source).toBeInstanceOf(NvidiaSmiSource);
    expect(selection.passedOver).toEqual([
      { kind: 'dcgm', reason: `dcgm GPU activity source (${dcgmUrl}) failed: HTTP 500 Internal Server Error: collector crashed` },
      { kind: 'nvml', reason: NO_NVML_REASON },
    ]);
    expect(selection.reason).toMatch(
      /^nvidia-smi: '.*nvidia-smi-ok --query-gpu=index,utilization.gpu --format=csv,noheader,nounits' ran, 8 GPU\(s\), mean activity 0.86/,
    );
    expect(selection.reason).toContain('coarser than tensor-pipe activity');
    expect(selection.reason).toContain(`passed over dcgm: dcgm GPU activity source (${dcgmUrl}) failed: HTTP 500`);
  });

  it('falls back past an exporter that lacks the tensor metric', async () => {
    const dcgmUrl = await exporter(200, 'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 61\n');
    const selection = await selectGpuActivitySource({ nvml: noNvml, dcgmUrl, nvidiaSmiPath: workingSmi });
    expect(selection.source.kind).toBe('nvidia-smi');
    expect(selection.passedOver[0]!.reason).toMatch(/DCGM_FI_PROF_PIPE_TENSOR_ACTIVE is not in the exporter output/);
  });

  it('ends at emulated when no hardware source works, with every reason in the log line', async () => {
    const dcgmUrl = await exporter(503, '');
    const selection = await selectGpuActivitySource({ nvml: noNvml, dcgmUrl, nvidiaSmiPath: brokenSmi });
    expect(selection.source).toBeInstanceOf(EmulatedGpuActivitySource);
    expect(selection.passedOver.map((p) => p.kind)).toEqual(['dcgm', 'nvml', 'nvidia-smi']);
    expect(selection.passedOver[2]!.reason).toMatch(/nvidia-smi-broken .*failed: exit code 6: No devices were found$/);
    expect(selection.reason).toMatch(
      /^emulated: no hardware source; activity comes only from pushes \(POST \/v1\/gpu-activity\) and reads 0 until the first one; passed over dcgm: .*HTTP 503 Service Unavailable; nvml: .*; nvidia-smi: .*exit code 6/,
    );
    await expect(selection.source.sample()).resolves.toEqual({ tensorActive: 0, perGpu: [] });
  });

  it('does not try dcgm without a URL', async () => {
    const selection = await selectGpuActivitySource({ nvml: noNvml, nvidiaSmiPath: missingSmi });
    expect(selection.source.kind).toBe('emulated');
    expect(selection.passedOver).toEqual([
      { kind: 'dcgm', reason: 'not configured (no dcgm-exporter URL)' },
      { kind: 'nvml', reason: NO_NVML_REASON },
      {
        kind: 'nvidia-smi',
        reason: `nvidia-smi GPU activity source (${missingSmi} --query-gpu=index,utilization.gpu --format=csv,noheader,nounits) failed: executable not found`,
      },
    ]);
  });

  it('passes an unreachable exporter over with ECONNREFUSED', async () => {
    const dcgmUrl = await exporter(200, DCGM_SCRAPE);
    await new Promise((resolve) => servers.pop()!.close(resolve));
    const selection = await selectGpuActivitySource({ nvml: noNvml, dcgmUrl, nvidiaSmiPath: workingSmi });
    expect(selection.source.kind).toBe('nvidia-smi');
    expect(selection.passedOver[0]!.reason).toMatch(/cannot reach the exporter: .*ECONNREFUSED/);
  });

  it('honours a preferred source ahead of a better one', async () => {
    const dcgmUrl = await exporter(200, DCGM_SCRAPE);
    const smi = await selectGpuActivitySource({ nvml: noNvml, dcgmUrl, nvidiaSmiPath: workingSmi, preferred: 'nvidia-smi' });
    expect(smi.source.kind).toBe('nvidia-smi');
    expect(smi.reason).toMatch(/^nvidia-smi \(preferred\): /);
    const emulated = await selectGpuActivitySource({
      nvml: noNvml,
      dcgmUrl,
      nvidiaSmiPath: workingSmi,
      preferred: 'emulated',
      emulated: { staleAfterMs: 1_000 },
    });
    expect(emulated.source.kind).toBe('emulated');
    expect(emulated.passedOver).toEqual([]);
  });

  it('falls back in the usual order when the preferred source fails', async () => {
    const dcgmUrl = await exporter(200, DCGM_SCRAPE);
    const selection = await selectGpuActivitySource({ nvml: noNvml, dcgmUrl, nvidiaSmiPath: missingSmi, preferred: 'nvml' });
    expect(selection.source.kind).toBe('dcgm');
    expect(selection.passedOver).toEqual([{ kind: 'nvml', reason: NO_NVML_REASON }]);
    expect(selection.reason).toContain(`passed over nvml: ${NO_NVML_REASON}`);
  });

  it('takes NVML when it reads every GPU: tensor activity from GPM where every GPU has it', async () => {
    const gpm = (values: number[]) => ({
      read: (): NvmlSample => ({
        available: true,
        reason: null,
        devices: values.map((v, index) => ({ index, gpuUtilization: 100, tensorActive: v, tensorActiveReason: null })),
      }),
    });
    const selection = await selectGpuActivitySource({ nvidiaSmiPath: workingSmi, nvml: gpm([40, 60]) });
    expect(selection.source.kind).toBe('nvml');
    expect(selection.reason).toBe(
      'nvml: NVML read 2 GPU(s), mean activity 0.50 from tensor-active (GPM); passed over dcgm: not configured (no dcgm-exporter URL)',
    );
    await expect(selection.source.sample()).resolves.toEqual({ tensorActive: 0.5, perGpu: [0.4, 0.6] });
  });

  it('NVML without GPM on one GPU reports utilization for all of them, and says so', async () => {
    const read = (): NvmlSample => ({
      available: true,
      reason: null,
      devices: [
        { index: 0, gpuUtilization: 90, tensorActive: 10, tensorActiveReason: null },
        { index: 1, gpuUtilization: 70, tensorActive: null, tensorActiveReason: 'this GPU has no GPM' },
      ],
    });
    const selection = await selectGpuActivitySource({ nvidiaSmiPath: workingSmi, nvml: { read } });
    expect(selection.source.kind).toBe('nvml');
    expect(selection.reason).toContain('from utilization.gpu (no GPM on these GPUs: any kernel counts, as with nvidia-smi)');
    await expect(selection.source.sample()).resolves.toEqual({ tensorActive: 0.8, perGpu: [0.9, 0.7] });
  });

  it('passes NVML over when a GPU gives no reading (0 would make a healthy trainer look hung)', async () => {
    const read = (): NvmlSample => ({
      available: true,
      reason: null,
      devices: [
        { index: 0, gpuUtilization: 90, tensorActive: null, tensorActiveReason: 'first sample' },
        { index: 1, error: 'nvmlDeviceGetUtilizationRates failed: GPU is lost', tensorActive: null, tensorActiveReason: null },
      ],
    });
    const selection = await selectGpuActivitySource({ nvidiaSmiPath: workingSmi, nvml: { read } });
    expect(selection.source.kind).toBe('nvidia-smi');
    expect(selection.passedOver[1]).toEqual({
      kind: 'nvml',
      reason: 'nvml GPU activity source (NVML) failed: GPU 1: nvmlDeviceGetUtilizationRates failed: GPU is lost',
    });
  });
});
