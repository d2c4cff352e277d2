import { execFile, ExecFileException } from 'node:child_process';
import { describeCause, GpuActivityReading, GpuActivitySource, GpuActivitySourceError, readingFromPerGpu } from './gpu-activity-source';

export const NVIDIA_SMI_ARGS = ['--query-gpu=index,utilization.gpu', '--format=csv,noheader,nounits'] as const;

export interface NvidiaSmiSourceOptions {
  /** The executable; default `nvidia-smi` looked up on PATH. */
  path?: string;
  /** nvidia-smi can hang on a wedged driver; that must fail the sample, not stall the agent. */
  timeoutMs?: number;
}

/**
 * Fallback source: `nvidia-smi --query-gpu=index,utilization.gpu`.
 *
 * utilization.gpu is coarser than tensor-pipe activity: it is the share of time *any* kernel was
 * running, tensor cores or not. It reads at least as high as tensor activity, so with it a hang can
 * only be missed in the direction of "active" (a kernel spinning on a stuck NCCL collective counts
 * as busy), never invented. That is why it is a fallback for when no dcgm-exporter runs.
 */
export class NvidiaSmiSource implements GpuActivitySource {
  readonly kind = 'nvidia-smi' as const;
  readonly path: string;
  private readonly timeoutMs: number;

  constructor(options: NvidiaSmiSourceOptions = {}) {
    this.path = options.path ?? 'nvidia-smi';
    this.timeoutMs = options.timeoutMs ?? 5_000;
  }

  /** The command as a person would type it, for error messages and the selection log. */
  get command(): string {
    return [this.path, ...NVIDIA_SMI_ARGS].join(' ');
  }

  async sample(): Promise<GpuActivityReading> {
    const stdout = await this.run();
    try {
      return parseNvidiaSmiUtilization(stdout);
    } catch (err) {
      throw new GpuActivitySourceError('nvidia-smi', this.command, describeCause(err), { cause: err });
    }
  }

  private run(): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(this.path, [...NVIDIA_SMI_ARGS], { timeout: this.timeoutMs, maxBuffer: 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        reject(new GpuActivitySourceError('nvidia-smi', this.command, this.whyRunFailed(err, stdout, stderr), { cause: err }));
      });
    });
  }

  private whyRunFailed(err: ExecFileException, stdout: string, stderr: string): string {
    if (err.code === 'ENOENT') return 'executable not found';
    if (err.code === 'EACCES') return 'executable not permitted to run';
    if (err.killed && err.signal) return `no answer within ${this.timeoutMs} ms (killed with ${err.signal})`;
    // nvidia-smi prints its reason ("couldn't communicate with the NVIDIA driver") on stdout, not stderr.
    const output = (stderr.trim() || stdout.trim()).split('\n').slice(0, 3).join(' ').slice(0, 300);
    const status = typeof err.code === 'number' ? `exit code ${err.code}` : err.signal ? `killed by ${err.signal}` : describeCause(err);
    return output ? `${status}: ${output}` : status;
  }
}

/**
 * Reads `index, utilization.gpu` lines (percent, `--format=csv,noheader,nounits`) into 0..1 per GPU,
 * in index order. Throws on a GPU without a number (`[N/A]`, `[Not Supported]`): counting it as 0
 * would make a healthy trainer look hung.
 */
export function parseNvidiaSmiUtilization(csv: string): GpuActivityReading {
  const byIndex = new Map<number, number>();
  const lines = csv.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    const fields = line.split(',').map((field) => field.trim());
    if (fields.length !== 2) throw new Error(`line ${i + 1}: expected 'index, utilization' but got '${line.slice(0, 200)}'`);
    const [indexField, utilizationField] = fields as [string, string];
    if (!/^\d+$/.test(indexField)) throw new Error(`line ${i + 1}: GPU index '${indexField}' is not a number`);
    if (!/^\d+(\.\d+)?$/.test(utilizationField)) throw new Error(`line ${i + 1}: GPU ${indexField} utilization '${utilizationField}' is not a number`);
    const percent = Number(utilizationField);
    if (percent > 100) throw new Error(`line ${i + 1}: GPU ${indexField} utilization ${percent}% is over 100%`);
    const index = Number(indexField);
    if (byIndex.has(index)) throw new Error(`line ${i + 1}: GPU ${index} listed twice`);
    byIndex.set(index, percent / 100);
  }
  if (byIndex.size === 0) throw new Error('no GPUs listed');
  const indexes = [...byIndex.keys()].sort((a, b) => a - b);
  return readingFromPerGpu(indexes.map((index) => byIndex.get(index)!));
}
