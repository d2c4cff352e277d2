import { nvmlSample, NvmlSample } from '@robustrl/ucx';
import { clampUnit, GpuActivityReading, GpuActivitySource, GpuActivitySourceError } from './gpu-activity-source';

export interface NvmlSourceOptions {
  /** Reads NVML (the native module's nvmlSample); replaced in tests. */
  read?: () => NvmlSample;
}

/**
 * NVML, read in-process through the native module (native/ucx/src/nvml.cc) — no exporter to run, no
 * `nvidia-smi` to fork every sample. Per GPU it reports, best first:
 *  - tensor-core activity from NVML's GPU performance monitoring (GPM, Hopper and later:
 *    NVML_GPM_METRIC_ANY_TENSOR_UTIL between this sample and the previous one) — the signal DCGM's
 *    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gives, so an NCCL kernel spinning on a stuck collective reads idle;
 *  - else utilization.gpu, the share of time any kernel ran — what nvidia-smi reads, and with the same
 *    flaw (a spin reads busy), errs only toward "active".
 * One basis for the whole machine: if any GPU lacks GPM, every GPU reports utilization (a mean of two
 * kinds of number would mean neither). `basis` says which, for the agent's log and status.
 */
export class NvmlSource implements GpuActivitySource {
  readonly kind = 'nvml' as const;
  private readonly read: () => NvmlSample;
  basis: 'tensor-active (GPM)' | 'utilization.gpu' | null = null;

  constructor(options: NvmlSourceOptions = {}) {
    this.read = options.read ?? nvmlSample;
    // GPM's activity is a rate between two samples: the first one only starts the window.
    this.read();
  }

  async sample(): Promise<GpuActivityReading> {
    const s = this.read();
    if (!s.available) throw new GpuActivitySourceError('nvml', 'NVML', s.reason ?? 'unavailable');
    if (s.devices.length === 0) throw new GpuActivitySourceError('nvml', 'NVML', 'NVML sees no GPU');
    const broken = s.devices.find((d) => d.error !== undefined || (d.tensorActive === null && typeof d.gpuUtilization !== 'number'));
    // A GPU without a number fails the sample: counting it as 0 would make a healthy trainer look hung.
    if (broken) throw new GpuActivitySourceError('nvml', 'NVML', `GPU ${broken.index}: ${broken.error ?? 'no utilization reading'}`);
    const tensor = s.devices.every((d) => d.tensorActive !== null);
    this.basis = tensor ? 'tensor-active (GPM)' : 'utilization.gpu';
    const perGpu = s.devices.map((d) => clampUnit((tensor ? d.tensorActive! : d.gpuUtilization!) / 100));
    return { tensorActive: clampUnit(perGpu.reduce((a, b) => a + b, 0) / perGpu.length), perGpu };
  }
}
