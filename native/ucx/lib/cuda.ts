/**
 * The CUDA driver (C++: cuda_driver.cc, cuda_js.cc), loaded by the addon at run time and present in
 * the stub build too: what the driver sees, and device-memory helpers for tools and tests.
 */
import { UcxUnavailableError, wrapSync } from './errors';
import { load, loadedAddon, type NativeGpu } from './native';
import type { CudaInfo, CudaIpcExport, MemoryType } from './types';

/** The device memory a CUDA IPC handle names: mapIpc's arguments. */
export interface IpcRegionSpec {
  /** The 64 bytes of a cudaIpcMemHandle_t / CUipcMemHandle (torch: storage._share_cuda_()'s handle). */
  handle: Uint8Array;
  /** Where the region starts inside the exported allocation (a tensor's storage offset in bytes). */
  offset?: number;
  length: number;
  /** The device the allocation lives on, as this process numbers devices. */
  device: number;
}

export function requireGpu(): NativeGpu {
  load();
  const native = loadedAddon();
  if (!native?.cudaInfo)
    throw new UcxUnavailableError('this build of the UCX addon has no CUDA functions: rebuild it (npm run build:native -w @robustrl/ucx)', 'CUDA_UNAVAILABLE');
  configureGpu(native as NativeGpu);
  return native as NativeGpu;
}
let gpuConfigured = false;
/**
 * ROBUSTRL_CUDA_DRIVER (a path to the CUDA driver library instead of libcuda.so.1) as this process's
 * JavaScript sees it, handed to the addon before its first CUDA call (the addon could read the C
 * environment itself, but a test runner's sandboxed process.env never reaches it).
 */
export function configureGpu(n: NativeGpu): void {
  if (gpuConfigured) return;
  gpuConfigured = true;
  const driverPath = process.env.ROBUSTRL_CUDA_DRIVER;
  if (driverPath) n.cudaConfigure({ driverPath });
}

/**
 * The CUDA driver as the addon sees it, and device-memory helpers for tools and tests (allocation, IPC
 * export, copies). Weight transfer itself goes through UcxWorker.mapIpc / mapDevice.
 */
export const cuda = {
  /** Never throws: `available: false` with the reason on machines without a usable driver. */
  info(): CudaInfo {
    load();
    const native = loadedAddon();
    if (!native?.cudaInfo)
      return { available: false, reason: 'this build of the UCX addon has no CUDA functions', driverPath: '', driverVersion: null, devices: [] };
    configureGpu(native as NativeGpu);
    return native.cudaInfo();
  },
  /** Makes `device`'s primary context current on this thread (UcxWorker does it for WorkerOptions.cudaDevice). */
  useDevice(device: number): void {
    wrapSync(() => requireGpu().cudaUseDevice(device));
  },
  alloc(device: number, length: number): bigint {
    return wrapSync(() => requireGpu().cudaAlloc(device, length));
  },
  free(address: bigint): void {
    wrapSync(() => requireGpu().cudaFree(address));
  },
  /** The IPC handle of the allocation holding `address` (for another process's mapIpc), and the address's offset in it. */
  ipcHandle(address: bigint): CudaIpcExport {
    return wrapSync(() => requireGpu().cudaIpcHandle(address));
  },
  copyToHost(address: bigint, dst: Uint8Array): void {
    wrapSync(() => requireGpu().cudaCopyToHost(address, dst));
  },
  copyFromHost(address: bigint, src: Uint8Array): void {
    wrapSync(() => requireGpu().cudaCopyFromHost(address, src));
  },
  /** Device to device, synchronous: the baseline a pull is measured against. */
  copy(dst: bigint, src: bigint, length: number): void {
    wrapSync(() => requireGpu().cudaCopy(dst, src, length));
  },
  /** What the driver says `address` is: 'cuda', 'cuda-managed', 'host', or null (not known to it). */
  memoryType(address: bigint): MemoryType | null {
    return wrapSync(() => requireGpu().cudaMemoryType(address));
  },
};
