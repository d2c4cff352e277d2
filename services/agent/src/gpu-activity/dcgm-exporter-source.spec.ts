import { readFileSync } from 'node:fs';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DcgmExporterSource, parseDcgmTensorActive } from './dcgm-exporter-source';
import { GpuActivitySourceError } from './gpu-activity-source';

// Written in dcgm-exporter 3.x's output format (HELP/TYPE per metric, the exporter's label set with
// Kubernetes pod attribution) for an 8×H100 trainer node; values made up, not captured from a machine.
const H100X8 = readFileSync(join(__dirname, 'fixtures', 'dcgm-exporter-h100x8.txt'), 'utf8');
const H100X8_TENSOR = [0.412345, 0.398765, 0.421098, 0.405432, 0.389012, 0.415678, 0.402345, 0.410987];

const labels = (gpu: string, extra = '') =>
  `gpu="${gpu}",UUID="GPU-0000000${gpu}-aaaa-bbbb-cccc-dddddddddddd",device="nvidia${gpu}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1"${extra}`;
const tensor = (gpu: string, value: string, extra = '') => `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{${labels(gpu, extra)}} ${value}`;
const HEADER = '# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.\n# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge';

describe('parseDcgmTensorActive', () => {
  it('reads one value per GPU from a real-format scrape and averages them, ignoring the other metrics', () => {
    const reading = parseDcgmTensorActive(H100X8);
    expect(reading.perGpu).toEqual(H100X8_TENSOR);
    expect(reading.tensorActive).toBeCloseTo(0.40695775, 9);
  });

  it('orders GPUs by numeric index whatever the order of the lines', () => {
    const text = [HEADER, tensor('10', '0.1'), tensor('2', '0.2'), tensor('9', '0.9'), tensor('0', '0')].join('\n');
    expect(parseDcgmTensorActive(text).perGpu).toEqual([0, 0.2, 0.9, 0.1]);
  });

  it('copes with escaped quotes, commas and braces in label values, trailing commas, CRLF, blank lines and timestamps', () => {
    const text = [
      HEADER,
      '',
      `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",pod="a \\"quoted\\" name, with {braces}",path="C:\\\\x",note="line\\nbreak",} 0.25 1712345678000`,
      `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE { gpu = "1" , modelName="NVIDIA H100 80GB HBM3" }\t0.75`,
      '# a free comment line',
    ].join('\r\n');
    expect(parseDcgmTensorActive(text)).toEqual({ tensorActive: 0.5, perGpu: [0.25, 0.75] });
  });

  it('reads a GPU split into MIG instances as its busiest instance', () => {
    const text = [
      HEADER,
      tensor('0', '0.000000', ',GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"'),
      tensor('0', '0.600000', ',GPU_I_PROFILE="3g.40gb",GPU_I_ID="2"'),
      tensor('1', '0.200000'),
    ].join('\n');
    expect(parseDcgmTensorActive(text)).toEqual({ tensorActive: 0.4, perGpu: [0.6, 0.2] });
  });

  it('takes scientific notation and clamps float noise just past the ends of 0..1', () => {
    const text = [HEADER, tensor('0', '1.0000000001'), tensor('1', '-0.0000000001'), tensor('2', '5e-1')].join('\n');
    expect(parseDcgmTensorActive(text).perGpu).toEqual([1, 0, 0.5]);
  });

  it('does not mistake a metric that merely starts with the same name for it', () => {
    const text = [HEADER, tensor('0', '0.3'), `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE_TOTAL{${labels('0')}} 99`].join('\n');
    expect(parseDcgmTensorActive(text).perGpu).toEqual([0.3]);
  });

  it('is not thrown by a malformed line of another metric', () => {
    const text = ['DCGM_FI_DEV_GPU_TEMP{gpu="0" 61', HEADER, tensor('0', '0.3')].join('\n');
    expect(parseDcgmTensorActive(text).perGpu).toEqual([0.3]);
  });

  it('fails on NaN, naming the GPUs, rather than reading an unmeasured GPU as idle', () => {
    const text = [HEADER, tensor('0', '0.5'), tensor('1', 'NaN'), tensor('3', 'nan')].join('\n');
    expect(() => parseDcgmTensorActive(text)).toThrow(/NaN\) for GPU 1, 3/);
  });

  it('fails on values that are not a ratio: infinities and percents', () => {
    expect(() => parseDcgmTensorActive([HEADER, tensor('0', '+Inf')].join('\n'))).toThrow(/line 3: GPU 0 reports Infinity, not a ratio 0..1/);
    expect(() => parseDcgmTensorActive([HEADER, tensor('4', '41.2')].join('\n'))).toThrow(/GPU 4 reports 41.2, not a ratio/);
  });

  it('says the metric is missing, and hints at the exporter counters file', () => {
    const withoutTensor = H100X8.split('\n')
      .filter((line) => !line.includes('DCGM_FI_PROF_PIPE_TENSOR_ACTIVE'))
      .join('\n');
    expect(() => parseDcgmTensorActive(withoutTensor)).toThrow(/DCGM_FI_PROF_PIPE_TENSOR_ACTIVE is not in the exporter output.*counters CSV/);
    expect(() => parseDcgmTensorActive('')).toThrow(/is not in the exporter output/);
  });

  it('tells a declared metric without samples from a missing one', () => {
    expect(() => parseDcgmTensorActive(HEADER)).toThrow(/declared but has no samples/);
  });

  it('points at the line of a malformed sample', () => {
    expect(() => parseDcgmTensorActive([HEADER, 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0} 0.5'].join('\n'))).toThrow(
      /line 3: malformed DCGM_FI_PROF_PIPE_TENSOR_ACTIVE sample \(unterminated value of label gpu\)/,
    );
    expect(() => parseDcgmTensorActive([HEADER, tensor('0', 'busy')].join('\n'))).toThrow(/line 3: .*value 'busy' is not a number/);
    expect(() => parseDcgmTensorActive([HEADER, `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{${labels('0')}}`].join('\n'))).toThrow(/line 3: .*no value/);
    expect(() => parseDcgmTensorActive([HEADER, 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0" device="x"} 1'].join('\n'))).toThrow(
      /expected ',' or '}' after label gpu/,
    );
  });

  it('refuses a sample without a gpu label', () => {
    expect(() => parseDcgmTensorActive([HEADER, 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{device="nvidia0"} 0.5'].join('\n'))).toThrow(/without a gpu label/);
  });
});

describe('DcgmExporterSource against a fake dcgm-exporter', () => {
  let server: Server | undefined;
  let requests: string[];

  /** A dcgm-exporter stand-in on a free port; `handle` answers every request. */
  async function startExporter(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
    requests = [];
    server = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      handle(req, res);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  }

  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  const servesText = (status: number, body: string) => (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(status, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
    res.end(body);
  };

  it('scrapes the metrics endpoint and reads the tensor activity', async () => {
    const url = await startExporter(servesText(200, H100X8));
    const source = new DcgmExporterSource({ url });
    expect(source.kind).toBe('dcgm');
    await expect(source.sample()).resolves.toEqual({ tensorActive: expect.closeTo(0.40695775, 9), perGpu: H100X8_TENSOR });
    expect(requests).toEqual(['GET /metrics']);
  });

  it('fails with the URL and the HTTP status when the exporter answers with an error', async () => {
    const url = await startExporter(servesText(503, 'DCGM not ready'));
    const failure = new DcgmExporterSource({ url }).sample();
    await expect(failure).rejects.toBeInstanceOf(GpuActivitySourceError);
    await expect(failure).rejects.toThrow(`dcgm GPU activity source (${url}) failed: HTTP 503 Service Unavailable: DCGM not ready`);
  });

  it('fails with the URL and the reason when the metric is missing', async () => {
    const url = await startExporter(servesText(200, '# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\nDCGM_FI_DEV_GPU_TEMP{gpu="0"} 61\n'));
    await expect(new DcgmExporterSource({ url }).sample()).rejects.toThrow(
      new RegExp(`^dcgm GPU activity source \\(${url}\\) failed: DCGM_FI_PROF_PIPE_TENSOR_ACTIVE is not in the exporter output`),
    );
  });

  it('fails with ECONNREFUSED when nothing listens', async () => {
    const url = await startExporter(servesText(200, H100X8));
    await new Promise((resolve) => server!.close(resolve));
    server = undefined;
    await expect(new DcgmExporterSource({ url }).sample()).rejects.toThrow(/failed: cannot reach the exporter: .*ECONNREFUSED/);
  });

  it('fails after its timeout when the exporter does not answer', async () => {
    const url = await startExporter(() => undefined);
    const started = Date.now();
    await expect(new DcgmExporterSource({ url, timeoutMs: 200 }).sample()).rejects.toThrow(/failed: no answer within 200 ms/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('refuses an invalid URL at construction', () => {
    expect(() => new DcgmExporterSource({ url: 'localhost:9400' })).toThrow(
      "dcgm GPU activity source (localhost:9400) failed: not an http(s) URL (scheme 'localhost:')",
    );
    expect(() => new DcgmExporterSource({ url: 'http://' })).toThrow('dcgm GPU activity source (http://) failed: not a valid URL');
  });
});
