/**
 * @robustrl/ucx — the one typed facade over the native UCX (UCP) addon.
 *
 * Every native function is declared here (NativeModule & co.) and only this file touches the
 * addon. Native errors carry `ucxKind` ("unavailable" | "peer" | "closed" | "timeout" | "ucx"),
 * `code` (the ucs_status_t name, e.g. "UCS_ERR_CONNECTION_RESET") and `status` (its number);
 * they are mapped to the typed error classes below.
 */
import * as path from 'node:path';

// ------------------------------------------------------------------------------------------
// Native declarations
interface NativeInfo {
  available: boolean;
  version: string | null;
  /**
   * Whether UCX, configured from the environment, can register CUDA memory (mapDevice): the
   * UCS_MEMORY_TYPE_CUDA bit of ucp_context_query(UCP_ATTR_FIELD_MEMORY_TYPES) on a probe context.
   */
  cudaSupported: boolean;
  reason: string | null;
}
interface NativeRemoteKey {
  readonly valid: boolean;
  destroy(): void;
}
interface NativeMapping {
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
type NativeRma = (
  local: NativeMapping,
  localOffset: number,
  length: number,
  remoteAddress: bigint,
  rkey: NativeRemoteKey,
  timeoutMs: number,
  describe?: boolean,
) => Promise<void | string>;
interface NativeEndpoint {
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
interface NativeListener {
  readonly port: number;
  close(): void;
}
interface NativeWorker {
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
interface NativeGpu {
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
interface NativeModule extends Partial<NativeGpu> {
  info(): NativeInfo;
  Worker?: new (opts: { config: Record<string, string> }) => NativeWorker;
}

// ------------------------------------------------------------------------------------------
// Errors
export class UcxError extends Error {
  /** ucs_status_t name (e.g. "UCS_ERR_CONNECTION_RESET"), or "UCX_ERROR" / "UCX_UNAVAILABLE". */
  readonly code: string;
  /** numeric ucs_status_t (0 when not from UCX) */
  readonly status: number;
  constructor(message: string, code = 'UCX_ERROR', status = 0, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}
/** The addon was built without UCX (stub) or failed to load. */
export class UcxUnavailableError extends UcxError {}
/** Connection failed or the peer died / became unreachable (UCX endpoint error handler fired). */
export class PeerUnreachableError extends UcxError {}
/** The endpoint (or worker) was closed, or the operation was issued on a failed endpoint. */
export class EndpointClosedError extends UcxError {}
/** The per-operation timeout elapsed. RMA/send timeouts also force-close the endpoint. */
export class TimeoutError extends UcxError {}
/**
 * A CUDA driver call failed (code: the CUresult's name, e.g. "CUDA_ERROR_INVALID_VALUE"). Without a
 * usable driver the error is a UcxUnavailableError with code "CUDA_UNAVAILABLE".
 */
export class CudaError extends UcxError {}

function mapError(e: unknown): Error {
  // Not `instanceof Error`: an error the addon made belongs to the realm that loaded it (jest runs
  // tests in a realm of their own), and it must keep its kind and code there too.
  if (typeof e !== 'object' || e === null || typeof (e as Error).message !== 'string') return new UcxError(String(e));
  const n = e as Error & { ucxKind?: string; code?: string; status?: number };
  if (n.ucxKind === undefined) return n; // TypeError / RangeError from argument checks
  const args: [string, string, number, { cause: unknown }] = [n.message, n.code ?? 'UCX_ERROR', n.status ?? 0, { cause: e }];
  switch (n.ucxKind) {
    case 'unavailable':
      return new UcxUnavailableError(...args);
    case 'peer':
      return new PeerUnreachableError(...args);
    case 'closed':
      return new EndpointClosedError(...args);
    case 'timeout':
      return new TimeoutError(...args);
    case 'cuda':
      return new CudaError(...args);
    default:
      return new UcxError(...args);
  }
}
async function wrap<T>(p: () => Promise<T>): Promise<T> {
  try {
    return await p();
  } catch (e) {
    throw mapError(e);
  }
}
function wrapSync<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw mapError(e);
  }
}

// ------------------------------------------------------------------------------------------
// Loading
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

function load(): UcxInfo {
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
function requireNative(): Required<NativeModule> {
  const info = load();
  if (!info.available || !native || !native.Worker) throw new UcxUnavailableError(`UCX unavailable: ${info.reason}`, 'UCX_UNAVAILABLE');
  return native as Required<NativeModule>;
}

// ------------------------------------------------------------------------------------------
// Public API
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
 * not check it (README "Reconnect", "Who may read what").
 */
export type RegionAccess = 'read-write' | 'remote-read';
export interface RegionOptions {
  access?: RegionAccess;
}
/** Default tag of the worker-address message exchanged by sendWorkerAddress / connectRma. */
export const WORKER_ADDRESS_TAG = 0xffff_ff00_0000_0001n;
export interface OpOptions {
  /** reject with TimeoutError after this many ms (0/undefined = no timeout) */
  timeoutMs?: number;
}
export interface WorkerOptions {
  /**
   * UCX configuration (keys with or without the UCX_ prefix), applied with ucp_config_modify on top
   * of the environment, e.g. { TLS: 'tcp' } or { TLS: 'posix,cma,self,tcp' }.
   * KEEPALIVE_INTERVAL defaults to '1s' unless set here or in the environment.
   */
  config?: Record<string, string>;
  /**
   * The CUDA device whose memory this worker will move (an ordinal as this process sees it, after
   * CUDA_VISIBLE_DEVICES). Its primary context is made current before the UCX worker is created: UCX
   * created without one treats device memory as host memory and every GET/PUT of it falls back to a
   * software emulation at about 0.1 GB/s (gpu-offline-build.md, section 3, rule 2). A worker created
   * without it refuses to register device memory (mapIpc, mapDevice) rather than be 1000x slower.
   */
  cudaDevice?: number;
}
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
export interface TagMessage {
  /** the receive buffer (a view of exactly `length` bytes) */
  data: Buffer;
  length: number;
  senderTag: bigint;
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

/** What a peer needs to GET from / PUT to a registered region. Serialize with encodeRemoteRegion. */
export interface RemoteRegionDescriptor {
  address: bigint;
  length: number;
  rkey: Buffer;
}
/** A remote region usable on one endpoint (rkey unpacked on that endpoint). */
export interface RemoteRegion {
  address: bigint;
  length: number;
  rkey: RemoteKey;
}

export class RemoteKey {
  /** @internal */
  constructor(readonly native: NativeRemoteKey) {}
  get valid(): boolean {
    return this.native.valid;
  }
  destroy(): void {
    this.native.destroy();
  }
}

/**
 * A registered (ucp_mem_map'ed) memory range. `buffer` is the host view of it: the Buffer passed to
 * map() (kept alive until unmap()), a Buffer over UCX's memory (mapAlloc) or over the file mapping
 * (mapFile), both detached (length 0) by unmap(), or an empty Buffer for device memory (mapDevice).
 */
export class MemoryRegion {
  /** @internal */
  constructor(
    readonly native: NativeMapping,
    readonly buffer: ArrayBufferView | ArrayBuffer,
  ) {}
  /** 'host', or 'cuda' / 'cuda-managed' for device memory (mapDevice, mapIpc) */
  get memoryType(): MemoryType {
    return this.native.memoryType;
  }
  /**
   * A copy of [offset, offset + length) into host memory, whatever memory the region is in (device
   * memory through the CUDA driver, synchronously): for checksums and tests, not for bulk data.
   */
  read(offset: number, length: number): Buffer {
    checkLocal(this, offset, length);
    const out = Buffer.allocUnsafe(length);
    if (this.memoryType === 'host' && this.buffer.byteLength > 0) {
      const view = ArrayBuffer.isView(this.buffer) ? this.buffer : new Uint8Array(this.buffer);
      Buffer.from(view.buffer, view.byteOffset + offset, length).copy(out);
    } else if (length > 0) wrapSync(() => requireGpu().cudaCopyToHost(this.address + BigInt(offset), out));
    return out;
  }
  /**
   * `length` bytes at each of `offsets`, back to back in one host Buffer, whatever memory the region is
   * in (device memory: one call into the addon for all of them). For sampled checksums.
   */
  readSamples(offsets: readonly number[], length: number): Buffer {
    for (const o of offsets) checkLocal(this, o, length);
    const out = Buffer.allocUnsafe(offsets.length * length);
    if (this.memoryType === 'host' && this.buffer.byteLength > 0) {
      const view = ArrayBuffer.isView(this.buffer) ? this.buffer : new Uint8Array(this.buffer);
      const bytes = Buffer.from(view.buffer, view.byteOffset, view.byteLength);
      offsets.forEach((o, i) => bytes.copy(out, i * length, o, o + length));
    } else if (out.length > 0) wrapSync(() => requireGpu().cudaGather(this.address, Float64Array.from(offsets), length, out));
    return out;
  }
  /** Writes `data` at `offset`, whatever memory the region is in (device memory through the CUDA driver). */
  write(offset: number, data: Uint8Array): void {
    checkLocal(this, offset, data.byteLength);
    if (this.memoryType === 'host' && this.buffer.byteLength > 0) {
      const view = ArrayBuffer.isView(this.buffer) ? this.buffer : new Uint8Array(this.buffer);
      Buffer.from(data.buffer, data.byteOffset, data.byteLength).copy(Buffer.from(view.buffer, view.byteOffset + offset, data.byteLength));
    } else if (data.byteLength > 0) wrapSync(() => requireGpu().cudaCopyFromHost(this.address + BigInt(offset), data));
  }
  /** What a peer holding its rkey may do (RegionAccess). */
  get access(): RegionAccess {
    return this.native.access;
  }
  get address(): bigint {
    return this.native.address;
  }
  get length(): number {
    return this.native.length;
  }
  get mapped(): boolean {
    return this.native.mapped;
  }
  /** ucp_rkey_pack: opaque bytes for the peer's Endpoint.unpackRkey */
  packRkey(): Buffer {
    return wrapSync(() => this.native.packRkey());
  }
  descriptor(): RemoteRegionDescriptor {
    return { address: this.address, length: this.length, rkey: this.packRkey() };
  }
  /** Unregister. Deferred until in-flight operations on this region complete. */
  unmap(): void {
    this.native.unmap();
  }
}

const epWrappers = new WeakMap<NativeEndpoint, Endpoint>();
function wrapEndpoint(n: NativeEndpoint): Endpoint {
  let e = epWrappers.get(n);
  if (!e) {
    e = new Endpoint(n);
    epWrappers.set(n, e);
  }
  return e;
}

export class Endpoint {
  /** @internal */
  constructor(private readonly native: NativeEndpoint) {}
  private userOnError: ((err: PeerUnreachableError) => void) | null = null;
  private readonly failureListeners: Array<(err: PeerUnreachableError) => void> = [];
  private handlerInstalled = false;
  get state(): EndpointState {
    return this.native.state;
  }
  private installHandler(): void {
    if (this.handlerInstalled) return;
    this.handlerInstalled = true;
    this.native.onError((err: Error) => {
      const e = mapError(err) as PeerUnreachableError;
      for (const f of [...this.failureListeners, ...(this.userOnError ? [this.userOnError] : [])]) {
        try {
          f(e);
        } catch (x) {
          queueMicrotask(() => {
            throw x;
          });
        }
      }
    });
  }
  /** Called once when the peer fails (UCX error handler); pending operations reject separately. */
  onError(cb: ((err: PeerUnreachableError) => void) | null): void {
    this.userOnError = cb;
    this.installHandler();
  }
  /** @internal used by connectRma to tie an RMA endpoint's lifetime to its control endpoint */
  addFailureListener(f: (err: PeerUnreachableError) => void): void {
    this.failureListeners.push(f);
    this.installHandler();
  }
  /**
   * @internal used by connectRma: the control endpoint to the same peer failed. This endpoint then
   * fails the same way (state 'failed' -> closed, onError fires with the control endpoint's code) and
   * its pending operations reject with PeerUnreachableError, also with errorHandling 'none', where
   * UCX itself reports nothing.
   */
  failFromControl(err: UcxError): void {
    this.native.failPeer(err.status);
  }
  unpackRkey(packed: Uint8Array): RemoteKey {
    return wrapSync(() => new RemoteKey(this.native.unpackRkey(packed)));
  }
  /** Convenience: unpack a descriptor received from the peer. */
  remoteRegion(d: RemoteRegionDescriptor): RemoteRegion {
    return { address: d.address, length: d.length, rkey: this.unpackRkey(d.rkey) };
  }
  /** RMA read: remote[srcOffset, +length) -> local[dstOffset, +length). */
  get(dst: MemoryRegion, dstOffset: number, src: RemoteRegion, srcOffset: number, length: number, opts: OpOptions = {}): Promise<void> {
    return this.rma('get', dst, dstOffset, src, srcOffset, length, opts, false).then(() => undefined);
  }
  /**
   * A GET like get(), which also says how UCX carried it: the protocol it selected for this pair of
   * memories and this size (ucp_request_query), e.g. a zero-copy over cuda_ipc, or a software emulation
   * of a device transfer over tcp — 1000x slower (see isEmulatedProtocol).
   */
  getDescribed(dst: MemoryRegion, dstOffset: number, src: RemoteRegion, srcOffset: number, length: number, opts: OpOptions = {}): Promise<string> {
    return this.rma('get', dst, dstOffset, src, srcOffset, length, opts, true).then(String);
  }
  /** RMA write: local[srcOffset, +length) -> remote[dstOffset, +length); resolves after remote completion (flush). */
  put(src: MemoryRegion, srcOffset: number, dst: RemoteRegion, dstOffset: number, length: number, opts: OpOptions = {}): Promise<void> {
    return this.rma('put', src, srcOffset, dst, dstOffset, length, opts, false).then(() => undefined);
  }
  /** A PUT like put(), which also says which protocol UCX selected for it (see getDescribed). */
  putDescribed(src: MemoryRegion, srcOffset: number, dst: RemoteRegion, dstOffset: number, length: number, opts: OpOptions = {}): Promise<string> {
    return this.rma('put', src, srcOffset, dst, dstOffset, length, opts, true).then(String);
  }
  private rma(
    op: 'get' | 'put',
    local: MemoryRegion,
    localOffset: number,
    remote: RemoteRegion,
    remoteOffset: number,
    length: number,
    opts: OpOptions,
    describe: boolean,
  ): Promise<void | string> {
    // Synchronous: a range outside the remote region throws at the call, before anything is posted.
    checkRemote(remote, remoteOffset, length);
    return wrap(() =>
      this.native[op](local.native, localOffset, length, remote.address + BigInt(remoteOffset), remote.rkey.native, opts.timeoutMs ?? 0, describe),
    );
  }
  /** Tagged send (control messages). `data` is kept alive until completion. */
  sendTag(tag: bigint, data: ArrayBufferView | ArrayBuffer, opts: OpOptions = {}): Promise<void> {
    return wrap(() => this.native.sendTag(tag, data, opts.timeoutMs ?? 0));
  }
  flush(opts: OpOptions = {}): Promise<void> {
    return wrap(() => this.native.flush(opts.timeoutMs ?? 0));
  }
  /** Graceful close (flushes), or force close (pending operations reject with EndpointClosedError). */
  close(opts: { force?: boolean } = {}): Promise<void> {
    return wrap(() => this.native.close(opts.force ?? false));
  }
  /** ucp_ep_print_info: the endpoint's lanes (transport/device per am, rma_bw, ... lane), for diagnostics. */
  printInfo(): string {
    return wrapSync(() => this.native.printInfo());
  }
}

function checkLocal(r: MemoryRegion, off: number, len: number): void {
  if (!Number.isSafeInteger(off) || !Number.isSafeInteger(len) || off < 0 || len < 0 || off + len > r.length)
    throw new RangeError(`range [${off}, ${off + len}) outside the region of ${r.length} bytes`);
}

/**
 * Whether a protocol description (Endpoint.getDescribed) is an emulation: UCX found no transport that
 * reaches the memory directly and copies it through a bounce buffer in software (for device memory
 * about 1000x slower than cuda_ipc's zero-copy).
 */
export function isEmulatedProtocol(description: string): boolean {
  return /emulation|software/i.test(description);
}

function checkRemote(r: RemoteRegion, off: number, len: number): void {
  if (!Number.isSafeInteger(off) || !Number.isSafeInteger(len) || off < 0 || len < 0 || off + len > r.length)
    throw new RangeError(`remote range [${off}, ${off + len}) outside remote region of ${r.length} bytes`);
}

export class Listener {
  /** @internal */
  constructor(private readonly native: NativeListener) {}
  /** the bound port (useful with port 0) */
  get port(): number {
    return this.native.port;
  }
  close(): void {
    this.native.close();
  }
}

/** ucp_context + ucp_worker, progressed from the Node event loop (uv_poll on the worker's efd). */
export class UcxWorker {
  private readonly native: NativeWorker;
  /** Whether a CUDA context was current when the UCX worker was created (WorkerOptions.cudaDevice). */
  readonly cudaContext: boolean;
  /** The device named by WorkerOptions.cudaDevice, or null. */
  readonly cudaDevice: number | null;
  constructor(opts: WorkerOptions = {}) {
    const n = requireNative();
    const config: Record<string, string> = { ...(opts.config ?? {}) };
    const hasKeepalive = Object.keys(config).some((k) => k.replace(/^UCX_/, '') === 'KEEPALIVE_INTERVAL');
    if (!hasKeepalive && process.env.UCX_KEEPALIVE_INTERVAL === undefined) config.KEEPALIVE_INTERVAL = '1s';
    this.cudaDevice = opts.cudaDevice ?? null;
    if (opts.cudaDevice !== undefined) wrapSync(() => requireGpu().cudaUseDevice(opts.cudaDevice!));
    if ((n as NativeModule).cudaInfo) configureGpu(n as NativeGpu);
    this.cudaContext = n.cudaHasContext?.() ?? false;
    this.native = wrapSync(() => new n.Worker({ config }));
  }
  static info(): UcxInfo {
    return ucxInfo();
  }
  stats(): WorkerStats {
    return this.native.stats();
  }
  /** Listen on host:port (port 0 = ephemeral; read listener.port). */
  listen(opts: { host?: string; port?: number }, onConnection: (ep: Endpoint) => void): Listener {
    return wrapSync(
      () =>
        new Listener(
          this.native.listen(opts.host ?? '0.0.0.0', opts.port ?? 0, (nep) => {
            try {
              onConnection(wrapEndpoint(nep));
            } catch (e) {
              queueMicrotask(() => {
                throw e;
              });
            }
          }),
        ),
    );
  }
  /** Create an endpoint to a listener; resolves once wire-up completed (ep flush). */
  connect(host: string, port: number, opts: OpOptions = {}): Promise<Endpoint> {
    return wrap(async () => wrapEndpoint(await this.native.connect(host, port, opts.timeoutMs ?? 0)));
  }
  /** This worker's UCP address (ucp_worker_get_address): opaque bytes for a peer's connectAddress(). */
  address(): Buffer {
    return wrapSync(() => this.native.address());
  }
  /**
   * Create an endpoint from a peer's worker address (ucp_ep_create with REMOTE_ADDRESS), no sockaddr
   * connection manager involved; resolves once wire-up completed (ep flush). Needs no listener on the
   * peer, only its address (received e.g. over a tag message). Works across hosts as long as the two
   * workers share a transport (tcp).
   */
  connectAddress(address: Uint8Array, opts: OpOptions & { errorHandling?: ErrorHandlingMode } = {}): Promise<Endpoint> {
    return wrap(async () => wrapEndpoint(await this.native.connectAddress(address, opts.timeoutMs ?? 0, opts.errorHandling ?? 'peer')));
  }
  /** Server side of connectRma: send this worker's address to the peer of `ep` as a tag message. */
  sendWorkerAddress(ep: Endpoint, opts: OpOptions & { tag?: bigint } = {}): Promise<void> {
    return ep.sendTag(opts.tag ?? WORKER_ADDRESS_TAG, this.address(), opts);
  }
  /**
   * Client side: receive the peer's worker address (sent by its sendWorkerAddress on `tag`) and open a
   * second endpoint from it for RMA; `control` (the sockaddr endpoint) keeps carrying tag messages.
   * When the control endpoint reports a peer failure, the RMA endpoint fails with it: its onError
   * fires, it is force-closed and its pending GET/PUTs reject with PeerUnreachableError. This is the
   * only peer-failure detection an errorHandling 'none' endpoint (shared memory on UCX 1.13) has;
   * the control endpoint's keepalive (KEEPALIVE_INTERVAL, 1 s by default) and the tcp connection
   * reset bound it. A peer that hangs without dying is not detected: pass timeoutMs. Use one tag per
   * peer if several peers may send their addresses concurrently.
   */
  async connectRma(control: Endpoint, opts: OpOptions & { tag?: bigint; errorHandling?: ErrorHandlingMode } = {}): Promise<Endpoint> {
    const m = await this.recvTag(opts.tag ?? WORKER_ADDRESS_TAG, { timeoutMs: opts.timeoutMs, maxLength: 64 * 1024 });
    const rma = await this.connectAddress(Buffer.from(m.data), opts);
    if (control.state !== 'open') {
      await rma.close({ force: true }).catch(() => {});
      throw new EndpointClosedError('control endpoint failed or closed while the RMA endpoint was being created');
    }
    control.addFailureListener((err) => rma.failFromControl(err));
    return rma;
  }
  /** Register a host buffer (ucp_mem_map). The buffer object is referenced until unmap()/close(). */
  map(buf: ArrayBufferView | ArrayBuffer, opts: RegionOptions = {}): MemoryRegion {
    return wrapSync(() => new MemoryRegion(this.native.map(buf, opts.access), buf));
  }
  /**
   * Allocate and register `length` bytes with UCP_MEM_MAP_ALLOCATE. UCX takes the memory from its
   * posix/sysv shared-memory md when it can, so a same-host peer's GET/PUT on this region can use the
   * posix/sysv RMA lanes (memcpy speed) instead of cma. `region.buffer` is a Buffer over that memory;
   * unmap() (and worker.close()) detach it before UCX frees the memory, so it reads as length 0 after.
   */
  mapAlloc(length: number, opts: RegionOptions = {}): MemoryRegion {
    return wrapSync(() => {
      const n = this.native.mapAlloc(length, opts.access);
      return new MemoryRegion(n, Buffer.from(n.buffer as ArrayBuffer));
    });
  }
  /**
   * Map a file (typically `/dev/shm/<name>`, written by another process) MAP_SHARED and register it
   * (ucp_mem_map of the mapping; UCX allocates nothing). `region.buffer` is a Buffer over the mapping:
   * writes are visible to every process that maps the file. The file must hold at least `length`
   * bytes; with `create` it is created (mode 0600) if missing and grown to `length` if shorter (never
   * shrunk). unmap() (deferred while operations are in flight) deregisters, detaches the Buffer
   * (length 0 after) and munmaps. The file itself is left in place.
   * Errors: UcxError with code 'ENOENT' / 'EACCES' / ... (errno name; `cause` has errno, syscall,
   * path); RangeError when the file is shorter than `length` and `create` is not set; TypeError for a
   * path that is not a regular file.
   * Transport: UCX 1.13 registers such memory with the cma/tcp mds only (like map()), so a same-host
   * peer's GET from it on an errorHandling 'none' endpoint is served by this worker (AM over shared
   * memory), not one-sided; see README "Shared memory: findings".
   */
  mapFile(path: string, length: number, opts: { create?: boolean } & RegionOptions = {}): MemoryRegion {
    return wrapSync(() => {
      const n = this.native.mapFile(path, length, opts.create ?? false, opts.access);
      return new MemoryRegion(n, Buffer.from(n.buffer as ArrayBuffer));
    });
  }
  /**
   * Register device memory that the caller allocated (e.g. a CUDA tensor's data pointer) for GET/PUT,
   * with ucp_mem_map(memory_type CUDA). The caller keeps the allocation alive until unmap(). Throws
   * UcxUnavailableError when this worker's UCX context cannot register CUDA memory (see
   * cudaSupported), and UcxError UCX_NO_CUDA_CONTEXT when the worker was created without
   * { cudaDevice }. `region.buffer` is an empty Buffer: device memory has no host view (read/write copy).
   */
  mapDevice(address: bigint, length: number, memoryType: 'cuda', opts: RegionOptions = {}): MemoryRegion {
    const region = wrapSync(() => new MemoryRegion(this.native.mapDevice(address, length, memoryType, opts.access), Buffer.alloc(0)));
    if (!this.cudaContext) {
      region.unmap();
      this.requireCudaContext('mapDevice');
    }
    return region;
  }
  /**
   * Register device memory that another process exported as a CUDA IPC handle (a framework's weight
   * bucket: python/robustrl_weights), opened in `device`'s primary context. A handle this process has
   * already opened is shared (the driver opens a handle once per process) and closed when its last
   * region is unmapped; the exporting process must keep the allocation alive until then. Device memory
   * needs a worker created with { cudaDevice } (else UcxError: transfers would be emulated).
   * Errors: UcxUnavailableError (no CUDA driver: code CUDA_UNAVAILABLE; or a UCX without CUDA),
   * CudaError (the driver refused the handle: freed by its exporter, opened in its own process, ...),
   * RangeError (the range is outside the exported allocation).
   *
   * `copy: true` registers a device-to-device copy of the range in an allocation of this process's own
   * instead (the handle is closed before this returns; unmap frees the copy): what a region that peers
   * GET from needs on a GPU, since UCX's cuda_ipc cannot export memory this process imported and falls
   * back to software emulation over tcp (README "GPU"). Costs the range's size in device memory.
   */
  mapIpc(spec: IpcRegionSpec, opts: RegionOptions & { copy?: boolean } = {}): MemoryRegion {
    const region = wrapSync(
      () => new MemoryRegion(this.native.mapIpc(spec.handle, spec.offset ?? 0, spec.length, spec.device, opts.access, opts.copy === true), Buffer.alloc(0)),
    );
    if (region.memoryType !== 'host' && !this.cudaContext) {
      region.unmap();
      this.requireCudaContext('mapIpc');
    }
    return region;
  }
  private requireCudaContext(what: string): void {
    if (this.cudaContext) return;
    throw new UcxError(
      `${what}: this worker was created without a current CUDA context, so UCX would move device memory by software emulation ` +
        '(about 0.1 GB/s instead of hundreds); create it with new UcxWorker({ cudaDevice })',
      'UCX_NO_CUDA_CONTEXT',
    );
  }
  /** Whether this worker's UCX context can register CUDA memory (UCP_ATTR_FIELD_MEMORY_TYPES). */
  get cudaSupported(): boolean {
    return wrapSync(() => this.native.cudaSupported());
  }
  /** Tagged receive of a message matching (senderTag & mask) === (tag & mask). */
  async recvTag(tag: bigint, opts: OpOptions & { mask?: bigint; maxLength?: number; buffer?: Buffer } = {}): Promise<TagMessage> {
    const buffer = opts.buffer ?? Buffer.alloc(opts.maxLength ?? 64 * 1024);
    const r = await wrap(() => this.native.recvTag(tag, opts.mask ?? 0xffffffffffffffffn, buffer, opts.timeoutMs ?? 0));
    return { data: r.data.subarray(0, r.length), length: r.length, senderTag: r.senderTag };
  }
  /** Force-close all endpoints and listeners, unmap all regions, destroy worker and context. */
  close(): void {
    this.native.close();
  }
}

// ------------------------------------------------------------------------------------------
// CUDA driver and NVML (loaded by the addon at run time; present in the stub build too)
function requireGpu(): NativeGpu {
  load();
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
function configureGpu(n: NativeGpu): void {
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

/** Per-GPU activity from NVML (utilisation, and tensor-core activity where GPM exists); never throws. */
export function nvmlSample(): NvmlSample {
  load();
  if (!native?.nvmlSample) return { available: false, reason: 'this build of the UCX addon has no NVML functions', devices: [] };
  return native.nvmlSample();
}

// ------------------------------------------------------------------------------------------
// Helpers for exchanging region descriptors (e.g. over a tag message)
export function encodeRemoteRegion(d: RemoteRegionDescriptor): Buffer {
  const head = Buffer.alloc(16);
  head.writeBigUInt64LE(d.address, 0);
  head.writeBigUInt64LE(BigInt(d.length), 8);
  return Buffer.concat([head, d.rkey]);
}
export function decodeRemoteRegion(b: Uint8Array): RemoteRegionDescriptor {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  return { address: buf.readBigUInt64LE(0), length: Number(buf.readBigUInt64LE(8)), rkey: Buffer.from(buf.subarray(16)) };
}
