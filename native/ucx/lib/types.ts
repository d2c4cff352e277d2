/**
 * The values that cross between the addon and JavaScript, shared by the native declarations
 * (native.ts) and the wrappers: endpoint states, memory types and access, worker statistics, and what
 * the CUDA driver and NVML report. No imports: every other file of the facade may depend on this one.
 */
export type EndpointState = 'open' | 'failed' | 'closing' | 'closed';
/**
 * 'peer' (default): UCP_ERR_HANDLING_MODE_PEER — a dead peer rejects pending operations with
 * PeerUnreachableError. On UCX 1.13 this excludes the shared-memory (posix/sysv) and cma transports,
 * so the endpoint runs over tcp even on the same host.
 * 'none': UCP_ERR_HANDLING_MODE_NONE — shared memory / cma are selected on the same host, but UCX does
 * not report peer failures on this endpoint; see UcxWorker.connectRma for how that is covered.
 */
export type ErrorHandlingMode = 'peer' | 'none';
/** Where a MemoryRegion's memory lives: host memory, or device memory (mapDevice, mapIpc). */
export type MemoryType = 'host' | 'cuda' | 'cuda-managed';
/**
 * What a peer holding a region's rkey may do: `read-write` (UCX's default) or `remote-read` — the
 * region is registered for remote read access only (UCP_MEM_MAP_PROT_REMOTE_READ without
 * REMOTE_WRITE), for memory others pull from and must never write, such as a weight version's source.
 * Enforced where the transport registers memory with the NIC (RDMA verbs: a PUT fails with a
 * protection error); transports that reach the memory through the CPU (tcp, cma, shared memory) do
 * not check it (docs/integrators/weights.md "Who may read what").
 */
export type RegionAccess = 'read-write' | 'remote-read';
export interface WorkerStats {
  wakeups: number;
  progressCalls: number;
  pendingOps: number;
  /**
   * Of pendingOps: operations already rejected whose UCX request will likely never complete
   * (errorHandling 'none' endpoint closed while its peer was dead). They keep their buffers and
   * regions referenced (a region's unmap() stays deferred) until worker.close(), but no longer keep
   * the process alive.
   */
  orphanedOps: number;
  endpoints: number;
  mappings: number;
  listeners: number;
}
/** What the CUDA driver of this machine offers (cuda.info()); never throws. */
export interface CudaInfo {
  available: boolean;
  reason: string | null;
  /** The library the addon opened: libcuda.so.1, or ROBUSTRL_CUDA_DRIVER. */
  driverPath: string;
  /** e.g. 13000 for CUDA 13.0; null when the driver is not usable. */
  driverVersion: number | null;
  devices: Array<{ index: number; name?: string; pciBusId?: string }>;
}
/** A CUDA IPC memory handle of the allocation that holds an address, and where the address lies in it. */
export interface CudaIpcExport {
  handle: Buffer;
  offset: number;
  allocationBytes: number;
}
/** One NVML reading per device (nvmlSample()). */
export interface NvmlSample {
  available: boolean;
  reason: string | null;
  devices: Array<{
    index: number;
    uuid?: string;
    /** utilization.gpu, 0–100: time any kernel ran. An NCCL kernel spinning on a collective counts as busy. */
    gpuUtilization?: number;
    memoryUtilization?: number;
    /** Tensor-core activity, 0–100, since the previous sample (NVML GPM, Hopper+): null when not available, see tensorActiveReason. */
    tensorActive: number | null;
    tensorActiveReason: string | null;
    error?: string;
  }>;
}
