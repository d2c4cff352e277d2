import { GpuActivityReading, GpuActivitySource } from './gpu-activity-source';

export interface EmulatedSourceOptions {
  /**
   * A push older than this no longer counts and the source reads 0 again: a trainer that reported
   * once and then hung must not look active forever. Default 60 s, well inside the detector's 300 s
   * idle window; `Infinity` keeps the latest push for good (tests, simulator).
   */
  staleAfterMs?: number;
  /** Clock in ms, injectable for tests. */
  now?: () => number;
}

/**
 * Activity pushed from outside: by the training framework (POST /v1/gpu-activity), a test or the
 * simulator. Used when the machine has no hardware source.
 *
 * Before the first push it reads 0, not "unknown": the detector must be able to flag a trainer that
 * never reports, and a missing reading would let it look healthy by silence. The same holds for a
 * push gone stale. Reading 0 is safe because the rule counts zero activity only in the training
 * phase, which the trainer itself announces.
 */
export class EmulatedGpuActivitySource implements GpuActivitySource {
  readonly kind = 'emulated' as const;
  private readonly staleAfterMs: number;
  private readonly now: () => number;
  private latest: { reading: GpuActivityReading; at: number } | null = null;

  constructor(options: EmulatedSourceOptions = {}) {
    this.staleAfterMs = options.staleAfterMs ?? 60_000;
    this.now = options.now ?? Date.now;
  }

  /** Records the latest activity; `perGpu`, when given, is one value per GPU in index order. */
  push(tensorActive: number, perGpu?: readonly number[]): void {
    assertUnit(tensorActive, 'tensorActive');
    perGpu?.forEach((value, i) => assertUnit(value, `perGpu[${i}]`));
    this.latest = { reading: { tensorActive, perGpu: perGpu ? [...perGpu] : [] }, at: this.now() };
  }

  /** When the latest push arrived (ms, the source's clock), or null before any. */
  get lastPushAt(): number | null {
    return this.latest?.at ?? null;
  }

  async sample(): Promise<GpuActivityReading> {
    if (this.latest === null || this.now() - this.latest.at > this.staleAfterMs) return { tensorActive: 0, perGpu: [] };
    return { tensorActive: this.latest.reading.tensorActive, perGpu: [...this.latest.reading.perGpu] };
  }
}

function assertUnit(value: number, name: string): void {
  if (!(typeof value === 'number' && value >= 0 && value <= 1)) throw new RangeError(`${name} must be a number in 0..1, got ${String(value)}`);
}
