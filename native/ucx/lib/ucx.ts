/**
 * @robustrl/ucx — the one typed facade over the native UCX (UCP) addon.
 *
 * One file per concept, mirroring the C++ (src/): native.ts declares every native function
 * (NativeModule & co.) and is the only file that loads the addon; errors.ts maps the addon's errors
 * (`ucxKind`, `code`: the ucs_status_t name, `status`: its number) to the typed error classes;
 * worker.ts, endpoint.ts, listener.ts and memory-region.ts wrap the UCX objects; cuda.ts and nvml.ts
 * the CUDA driver and NVML; types.ts holds the values shared by the declarations and the wrappers.
 * This file is the package's entry point (dist/ucx.js): it re-exports the public API.
 */
export { CudaError, EndpointClosedError, PeerUnreachableError, TimeoutError, UcxError, UcxUnavailableError } from './errors';
export { isAvailable, UCX_CUDA_DEFAULT_ENV, UCX_DEFAULT_ENV, ucxInfo } from './native';
export type { UcxInfo } from './native';
export type { CudaInfo, CudaIpcExport, EndpointState, ErrorHandlingMode, MemoryType, NvmlSample, RegionAccess, WorkerStats } from './types';
export { UcxWorker, WORKER_ADDRESS_TAG } from './worker';
export type { TagMessage, WorkerOptions } from './worker';
export { Endpoint, isEmulatedProtocol } from './endpoint';
export type { OpOptions } from './endpoint';
export { Listener } from './listener';
export { decodeRemoteRegion, encodeRemoteRegion, MemoryRegion, RemoteKey } from './memory-region';
export type { RegionOptions, RemoteRegion, RemoteRegionDescriptor } from './memory-region';
export { cuda } from './cuda';
export type { IpcRegionSpec } from './cuda';
export { nvmlSample } from './nvml';
