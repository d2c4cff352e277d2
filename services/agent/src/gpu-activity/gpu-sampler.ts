import type { Logger } from '@nestjs/common';
import type { DataOf } from '@robustrl/contracts';
import { EmulatedGpuActivitySource } from './emulated-source';
import type { GpuActivitySource } from './gpu-activity-source';
import { selectGpuActivitySource, SelectGpuActivitySourceOptions } from './select-gpu-activity-source';

/**
 * The machine's GPU activity, sampled every `intervalSeconds` from the best source the machine has
 * (select-gpu-activity-source.ts) and published as `GpuActivitySampled` — what the detector tells a hang
 * from a phase without GPU work by (paper §4.2).
 */
export class GpuSampler {
  private source: GpuActivitySource = new EmulatedGpuActivitySource();
  private reason = 'not selected yet';
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly settings: {
      machineId: string;
      intervalSeconds: number;
      dcgmUrl: string | undefined;
      preferred: SelectGpuActivitySourceOptions['preferred'];
      gpus: number;
    },
    private readonly publish: (sample: DataOf<'GpuActivitySampled'>) => Promise<unknown>,
    private readonly logger: Logger,
  ) {}

  /** Picks the source (before the machine registers: its reason is logged with the agent's start). */
  async select(): Promise<void> {
    const { dcgmUrl, preferred, gpus } = this.settings;
    const selection = await selectGpuActivitySource({ dcgmUrl, preferred, gpus });
    this.source = selection.source;
    this.reason = selection.reason;
    this.logger.log(`GPU activity source: ${selection.reason}`);
    if (selection.source.kind === 'emulated')
      this.logger.warn('no hardware GPU activity source: the framework must POST /v1/gpu-activity, or a trainer reads as idle');
  }

  /** Samples from now on (once the machine registered). */
  start(): void {
    this.timer ??= setInterval(() => void this.sample(), this.settings.intervalSeconds * 1000);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  status() {
    return { kind: this.source.kind, reason: this.reason };
  }

  /** The framework's own GPU activity reports; refused (false) when a hardware source is in charge. */
  push(tensorActive: number, perGpu?: number[]): boolean {
    if (!(this.source instanceof EmulatedGpuActivitySource)) return false;
    this.source.push(tensorActive, perGpu);
    return true;
  }

  private async sample(): Promise<void> {
    try {
      const reading = await this.source.sample();
      await this.publish({
        machineId: this.settings.machineId,
        sampledAt: new Date().toISOString(),
        intervalSeconds: this.settings.intervalSeconds,
        tensorActive: reading.tensorActive,
        ...(reading.perGpu.length ? { perGpu: reading.perGpu } : {}),
        source: this.source.kind,
      });
    } catch (err) {
      // A failed sample is no sample: the detector counts silence as idle, which is the safe side.
      this.logger.warn(`GPU activity sample failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
