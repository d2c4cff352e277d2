/**
 * The native addon (C++: module.cc and one file per class): its shape, declared here (NativeModule &
 * co.), and its loader. Only this file loads the addon; the wrappers reach it through load(),
 * requireNative() and loadedAddon().
 */
import * as path from 'node:path';
import { UcxUnavailableError } from './errors';
import type { CudaInfo, CudaIpcExport, EndpointState, ErrorHandlingMode, MemoryType, NvmlSample, RegionAccess, WorkerStats } from './types';

export interface NativeInfo {
  available: boolean;
  version: string | null;
  /**
   * Whether UCX, configured from the environment, can register CUDA memory (mapDevice): the
   * UCS_MEMORY_TYPE_CUDA bit of ucp_context_query(UCP_ATTR_FIELD_MEMORY_TYPES) on a probe context.
   */
  cudaSupported: boolean;
  reason: string | null;
}
export interface NativeRemoteKey {
  readonly valid: boolean;
  destroy(): void;
}
export interface NativeMapping {
  readonly address: bigint;
  readonly length: number;
  readonly mapped: boolean;
  readonly buffer: ArrayBuffer | ArrayBufferView | null;
  readonly memoryType: MemoryType;
  readonly access: RegionAccess;
  packRkey(): Buffer;
  unmap(): void;
}
/** A GET or PUT; with `describe` it resolves with the protocol UCX chose (ucp_request_query). */
export type NativeRma = (
  local: NativeMapping,
  localOffset: number,
  length: number,
  remoteAddress: bigint,
  rkey: NativeRemoteKey,
  timeoutMs: number,
  describe?: boolean,
) => Promise<void | string>;
export interface NativeEndpoint {
  readonly state: EndpointState;
  get: NativeRma;
  put: NativeRma;
  sendTag(tag: bigint, data: ArrayBufferView | ArrayBuffer, timeoutMs: number): Promise<void>;
  flush(timeoutMs: number): Promise<void>;
  unpackRkey(packed: Uint8Array): NativeRemoteKey;
  close(force: boolean): Promise<void>;
  onError(cb: ((err: Error) => void) | null): void;
  printInfo(): string;
  failPeer(status: number): void;
}
export interface NativeListener {
  readonly port: number;
  close(): void;
}
export interface NativeWorker {
  info(): { efd: number; closed: boolean };
  stats(): WorkerStats;
  listen(host: string, port: number, onConnection: (ep: NativeEndpoint) => void): NativeListener;
  connect(host: string, port: number, timeoutMs: number): Promise<NativeEndpoint>;
  connectAddress(address: Uint8Array, timeoutMs: number, errorHandling: ErrorHandlingMode): Promise<NativeEndpoint>;
  address(): Buffer;
  map(buf: ArrayBufferView | ArrayBuffer, access?: RegionAccess): NativeMapping;
  mapAlloc(length: number, access?: RegionAccess): NativeMapping;
  mapFile(path: string, length: number, create: boolean, access?: RegionAccess): NativeMapping;
  mapDevice(address: bigint, length: number, memoryType: 'cuda', access?: RegionAccess): NativeMapping;
  mapIpc(handle: Uint8Array, offset: number, length: number, device: number, access?: RegionAccess, copy?: boolean): NativeMapping;
  cudaSupported(): boolean;
  recvTag(tag: bigint, mask: bigint, buffer: Buffer, timeoutMs: number): Promise<{ data: Buffer; length: number; senderTag: bigint }>;
  close(): void;
}
/** The CUDA driver and NVML functions (cuda_js.cc, nvml.cc): in every build, the stub's too; absent from an old build. */
export interface NativeGpu {
  /** Which driver library to open (before the first CUDA call; later calls change nothing). */
  cudaConfigure(opts: { driverPath?: string }): void;
  cudaInfo(): CudaInfo;
  cudaUseDevice(device: number): void;
  cudaHasContext(): boolean;
  cudaAlloc(device: number, length: number): bigint;
  cudaFree(address: bigint): void;
  cudaIpcHandle(address: bigint): CudaIpcExport;
  cudaCopyToHost(address: bigint, dst: Uint8Array): void;
  cudaCopyFromHost(address: bigint, src: Uint8Array): void;
  cudaCopy(dst: bigint, src: bigint, length: number): void;
  cudaGather(address: bigint, offsets: Float64Array, length: number, dst: Uint8Array): void;
  cudaMemoryType(address: bigint): MemoryType | null;
  nvmlSample(): NvmlSample;
}
export interface NativeModule extends Partial<NativeGpu> {
  info(): NativeInfo;
  Worker?: new (opts: { config: Record<string, string> }) => NativeWorker;
}

export interface UcxInfo extends NativeInfo {
  /** path of the loaded addon, or null if none could be loaded */
  addonPath: string | null;
}

let native: NativeModule | null = null;
let loadInfo: UcxInfo | null = null;

/**
 * UCX's memory hooks are off unless the operator asks for them. By default UCX (UCM) hot-patches the
 * code of libc's mmap/munmap/madvise/brk/sbrk ("bistro" hooks) when the first context is created, to
 * invalidate its registration cache. Node always has threads running (V8's GC and compiler workers call
 * mmap and madvise constantly); a thread inside one of those functions while its first bytes are being
 * rewritten resumes on half-written code. We saw it as rare heap corruption (segfaults in V8's GC, about 1
 * in 60 processes that create two contexts); UCX knows the race (openucx/ucx test_hooks flakes, JUCX
 * #4870). robustrl registers its buffers explicitly and keeps them registered, so it needs no
 * registration cache. Must be set before the UCX libraries load (they read it when the addon is loaded).
 */
export const UCX_DEFAULT_ENV: Readonly<Record<string, string>> = { UCX_MEM_EVENTS: 'no' };

/**
 * What UCX's cuda_ipc transport needs to move device memory at device speed, set where this UCX can
 * register CUDA memory, unless the operator set it (gpu-offline-build.md, section 3, rule 1): without
 * NVLink, UCX 1.22 disables cuda_ipc's GET ("cuda-ipc get zcopy disabled as no nvlinks detected") and a
 * GET of device memory runs as a software emulation over tcp at about 0.1 GB/s instead of ~900 GB/s.
 * Read when a worker's interfaces open, so it is set before the first UcxWorker. (Rule 2, a CUDA context
 * before the worker, is WorkerOptions.cudaDevice.)
 */
export const UCX_CUDA_DEFAULT_ENV: Readonly<Record<string, string>> = { UCX_CUDA_IPC_ENABLE_GET_ZCOPY: 'on' };

export function load(): UcxInfo {
  if (loadInfo) return loadInfo;
  for (const [name, value] of Object.entries(UCX_DEFAULT_ENV)) if (process.env[name] === undefined) process.env[name] = value;
  // ROBUSTRL_UCX_ADDON selects another build (the tests use build/Release/ucx_stub.node).
  const candidates = process.env.ROBUSTRL_UCX_ADDON
    ? [path.resolve(process.env.ROBUSTRL_UCX_ADDON)]
    : [path.join(__dirname, '..', 'build', 'Release', 'ucx.node'), path.join(__dirname, '..', 'build', 'Debug', 'ucx.node')];
  const errors: string[] = [];
  for (const p of candidates) {
    try {
      native = require(p) as NativeModule;
      loadInfo = { ...native.info(), addonPath: p };
      if (loadInfo.cudaSupported)
        for (const [name, value] of Object.entries(UCX_CUDA_DEFAULT_ENV)) if (process.env[name] === undefined) process.env[name] = value;
      return loadInfo;
    } catch (e) {
      errors.push(`${p}: ${(e as Error).message}`);
    }
  }
  loadInfo = {
    available: false,
    version: null,
    cudaSupported: false,
    reason: `native UCX addon could not be loaded (rebuild it with \`npm run build:native -w @robustrl/ucx\`; UCX itself: \`bash deploy/local/ucx.sh install\`): ${errors.join('; ')}`,
    addonPath: null,
  };
  return loadInfo;
}

/** Whether UCX is usable, its version, and why not. Never throws. */
export function ucxInfo(): UcxInfo {
  return { ...load() };
}
export function isAvailable(): boolean {
  return load().available;
}
export function requireNative(): Required<NativeModule> {
  const info = load();
  if (!info.available || !native || !native.Worker) throw new UcxUnavailableError(`UCX unavailable: ${info.reason}`, 'UCX_UNAVAILABLE');
  return native as Required<NativeModule>;
}
/** The loaded addon (after load()), or null when none could be loaded. */
export function loadedAddon(): NativeModule | null {
  return native;
}
