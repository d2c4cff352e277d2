import { MemoryRegion, UcxUnavailableError, UcxWorker } from '@robustrl/ucx';
import { RobustrlError } from '@robustrl/bus';

/** One bucket handed over as a CUDA IPC handle (python/robustrl_weights exports them). */
export interface IpcBucket {
  sizeBytes: number;
  /** The 64-byte cudaIpcMemHandle_t, base64. */
  handle: string;
  /** Where the bucket starts in the exported allocation. */
  offset: number;
  device: number;
}

export class WeightTransferUnavailableError extends RobustrlError {}

/**
 * Registers one region per bucket from its IPC handle (a trainer's published buckets, or a rollout's
 * pull target); on a failure, unmaps those already made and says which bucket. `copy`: each region is a
 * device copy of the bucket in the agent's own memory (UcxWorker.mapIpc), for buckets that peers GET:
 * UCX cannot serve memory the agent imported over cuda_ipc (native/ucx/README.md "GPU").
 */
export function mapIpcBuckets(
  worker: UcxWorker,
  buckets: readonly IpcBucket[],
  access: 'remote-read' | 'read-write',
  opts: { copy?: boolean } = {},
): MemoryRegion[] {
  const regions: MemoryRegion[] = [];
  try {
    buckets.forEach((b, i) => {
      const handle = Buffer.from(b.handle, 'base64');
      if (handle.length !== 64) throw new RangeError(`bucket ${i}: handle must be the 64 bytes of a CUDA IPC handle (base64), got ${handle.length}`);
      try {
        regions.push(worker.mapIpc({ handle, offset: b.offset, length: b.sizeBytes, device: b.device }, { access, copy: opts.copy }));
      } catch (err) {
        // No CUDA here (503 to the framework) vs. a handle this machine cannot use (400: the caller's to fix).
        const why = `bucket ${i}: ${err instanceof Error ? err.message : String(err)}`;
        throw err instanceof UcxUnavailableError ? new WeightTransferUnavailableError(why) : new RangeError(why, { cause: err });
      }
    });
  } catch (err) {
    for (const r of regions) r.unmap();
    throw err;
  }
  return regions;
}
