import { RobustrlError } from '@robustrl/bus';

/**
 * Where the agent reads its machine's TensorCore activity from. The detector flags a trainer whose
 * activity stays at zero for 300 s of the training phase (paper §4), so every source must err toward
 * reporting *less* activity when in doubt, never more: a source that invents activity hides a hang.
 *
 * Kinds, best first (same names as `GpuActivitySampled.source` in @robustrl/contracts):
 * - `dcgm`: dcgm-exporter's DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, the metric the rule is defined on.
 * - `nvml`: NVML through the native module (nvml-source.ts): tensor-core activity from GPM where the
 *   GPUs have it (Hopper+), else utilization.gpu.
 * - `nvidia-smi`: utilization.gpu, a coarser fallback (see nvidia-smi-source.ts).
 * - `emulated`: values pushed by the framework, a test or the simulator.
 * - `process-cpu`: no GPU: the role processes' CPU time stands in (process-cpu-source.ts); only when asked for.
 */
export const GPU_ACTIVITY_SOURCE_KINDS = ['dcgm', 'nvml', 'nvidia-smi', 'emulated', 'process-cpu'] as const;
export type GpuActivitySourceKind = (typeof GPU_ACTIVITY_SOURCE_KINDS)[number];

export interface GpuActivityReading {
  /** Mean activity over the machine's GPUs, 0..1. */
  tensorActive: number;
  /**
   * One value per GPU, 0..1, in GPU index order. Empty when the source only knows the machine mean
   * (an emulated push without a breakdown); the agent then leaves `perGpu` out of its event.
   */
  perGpu: number[];
}

export interface GpuActivitySource {
  readonly kind: GpuActivitySourceKind;
  /** One reading now. Rejects with a `GpuActivitySourceError` when the source cannot answer. */
  sample(): Promise<GpuActivityReading>;
}

/** A source that could not produce a reading; the message names the source, its target and why. */
export class GpuActivitySourceError extends RobustrlError {
  constructor(
    readonly kind: GpuActivitySourceKind,
    /** The URL scraped or the command run. */
    readonly target: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`${kind} GPU activity source (${target}) failed: ${reason}`, options);
  }
}

/** Mean of per-GPU values; throws on an empty list because a machine without GPUs has no activity to report. */
export function readingFromPerGpu(perGpu: number[]): GpuActivityReading {
  if (perGpu.length === 0) throw new Error('no GPU values to average');
  const sum = perGpu.reduce((total, value) => total + value, 0);
  return { tensorActive: clampUnit(sum / perGpu.length), perGpu };
}

/** Rounding can push a mean of values in 0..1 a hair past 1; the contract rejects anything outside. */
export function clampUnit(value: number): number {
  return Math.min(1, Math.max(0, value));
}

/** The `code` of a Node system error (ENOENT, ECONNREFUSED, ...) with its message, or the thing itself. */
export function describeCause(err: unknown): string {
  if (isErrorLike(err)) {
    const code = typeof err.code === 'string' ? err.code : undefined;
    // Connection failures to a dual-stack host arrive as an AggregateError with only a code, no message.
    if (!err.message) return code ?? err.name;
    return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

/**
 * Duck-typed rather than `instanceof Error`: errors from fetch() (undici) and DOMException timeouts
 * may come from another realm (jest's sandbox, for one), where `instanceof` is false.
 */
export function isErrorLike(err: unknown): err is { name: string; message: string; code?: unknown; cause?: unknown } {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { message?: unknown }).message === 'string' &&
    typeof (err as { name?: unknown }).name === 'string'
  );
}
