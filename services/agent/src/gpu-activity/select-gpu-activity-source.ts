import { DcgmExporterSource } from './dcgm-exporter-source';
import { EmulatedGpuActivitySource, EmulatedSourceOptions } from './emulated-source';
import { describeCause, GpuActivityReading, GpuActivitySource, GpuActivitySourceKind } from './gpu-activity-source';
import { NvidiaSmiSource } from './nvidia-smi-source';
import { NvmlSource, NvmlSourceOptions } from './nvml-source';
import { ProcessCpuSource } from './process-cpu-source';

export interface SelectGpuActivitySourceOptions {
  /** dcgm-exporter metrics URL; without it dcgm is not tried (there is no safe default host to guess). */
  dcgmUrl?: string;
  /** nvidia-smi executable; default `nvidia-smi` on PATH. */
  nvidiaSmiPath?: string;
  /** Tried first; when it fails the usual order follows, so a wrong preference degrades instead of stopping the agent. */
  preferred?: GpuActivitySourceKind;
  /** Per probe (scrape or command run). */
  timeoutMs?: number;
  /** For the emulated source, when it is the one chosen. */
  emulated?: EmulatedSourceOptions;
  /** For the NVML source (tests replace its reader). */
  nvml?: NvmlSourceOptions;
  /** The machine's GPUs, for the process-cpu source (one busy core stands for one busy GPU). */
  gpus?: number;
}

export interface GpuActivitySourceSelection {
  source: GpuActivitySource;
  /** One line for the agent's log: what was chosen, and why each better source was passed over. */
  reason: string;
  /** The sources tried or considered before the chosen one, with why each was not taken. */
  passedOver: { kind: GpuActivitySourceKind; reason: string }[];
}

/** Best first: the detector's trainer rule is defined on DCGM tensor-pipe activity (paper §4). */
const DEFAULT_ORDER: readonly GpuActivitySourceKind[] = ['dcgm', 'nvml', 'nvidia-smi', 'emulated'];

type Attempt = { source: GpuActivitySource; description: string } | { rejected: string };

/**
 * Picks the machine's GPU activity source: dcgm (when a URL is given and one scrape succeeds), else
 * NVML through the native module (when it reads every GPU), else nvidia-smi (when one run succeeds),
 * else emulated, which never fails. A source is only chosen after
 * it produced a reading, so a misconfigured exporter shows up at startup rather than as a stream of
 * failed samples.
 */
export async function selectGpuActivitySource(options: SelectGpuActivitySourceOptions = {}): Promise<GpuActivitySourceSelection> {
  // process-cpu is in no default order: a stand-in is taken only when asked for.
  const order = options.preferred ? [options.preferred, ...DEFAULT_ORDER.filter((kind) => kind !== options.preferred)] : DEFAULT_ORDER;
  const passedOver: GpuActivitySourceSelection['passedOver'] = [];
  for (const kind of order) {
    const attempt = await tryKind(kind, options);
    if ('rejected' in attempt) {
      passedOver.push({ kind, reason: attempt.rejected });
      continue;
    }
    const preferredNote = options.preferred === kind ? ' (preferred)' : '';
    const passedNote = passedOver.length > 0 ? `; passed over ${passedOver.map((p) => `${p.kind}: ${p.reason}`).join('; ')}` : '';
    return { source: attempt.source, reason: `${kind}${preferredNote}: ${attempt.description}${passedNote}`, passedOver };
  }
  // Unreachable: emulated is in every order and never rejected.
  throw new Error('no GPU activity source available');
}

async function tryKind(kind: GpuActivitySourceKind, options: SelectGpuActivitySourceOptions): Promise<Attempt> {
  switch (kind) {
    case 'dcgm': {
      if (!options.dcgmUrl) return { rejected: 'not configured (no dcgm-exporter URL)' };
      try {
        const source = new DcgmExporterSource({ url: options.dcgmUrl, timeoutMs: options.timeoutMs });
        return { source, description: `dcgm-exporter at ${source.url} answered, ${summarize(await source.sample())}` };
      } catch (err) {
        return { rejected: describeCause(err) };
      }
    }
    case 'nvml': {
      try {
        const source = new NvmlSource(options.nvml);
        // GPM's window needs a moment between the priming sample and this one.
        await new Promise((r) => setTimeout(r, options.nvml?.read ? 0 : 200));
        const reading = await source.sample();
        return {
          source,
          description: `NVML read ${summarize(reading)} from ${source.basis}${source.basis === 'utilization.gpu' ? ' (no GPM on these GPUs: any kernel counts, as with nvidia-smi)' : ''}`,
        };
      } catch (err) {
        return { rejected: describeCause(err) };
      }
    }
    case 'nvidia-smi': {
      const source = new NvidiaSmiSource({ path: options.nvidiaSmiPath, timeoutMs: options.timeoutMs });
      try {
        return {
          source,
          description: `'${source.command}' ran, ${summarize(await source.sample())}; utilization.gpu counts any kernel, coarser than tensor-pipe activity`,
        };
      } catch (err) {
        return { rejected: describeCause(err) };
      }
    }
    case 'process-cpu':
      return {
        source: new ProcessCpuSource({ gpus: options.gpus ?? 1 }),
        description: `a stand-in for GPUs: the role processes' CPU time per wall second, one busy core per GPU (${options.gpus ?? 1})`,
      };
    case 'emulated':
      return {
        source: new EmulatedGpuActivitySource(options.emulated),
        description: 'no hardware source; activity comes only from pushes (POST /v1/gpu-activity) and reads 0 until the first one',
      };
  }
}

function summarize(reading: GpuActivityReading): string {
  return `${reading.perGpu.length} GPU(s), mean activity ${reading.tensorActive.toFixed(2)}`;
}
