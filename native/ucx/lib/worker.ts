/** A UCP context and worker (C++: context.cc, worker.cc): connections, registrations, tagged receives. */
import { configureGpu, type IpcRegionSpec, requireGpu } from './cuda';
import { type Endpoint, type OpOptions, wrapEndpoint } from './endpoint';
import { EndpointClosedError, UcxError, wrap, wrapSync } from './errors';
import { Listener } from './listener';
import { MemoryRegion, type RegionOptions } from './memory-region';
import { type NativeGpu, type NativeModule, type NativeWorker, requireNative, type UcxInfo, ucxInfo } from './native';
import type { ErrorHandlingMode, WorkerStats } from './types';

/** Default tag of the worker-address message exchanged by sendWorkerAddress / connectRma. */
export const WORKER_ADDRESS_TAG = 0xffff_ff00_0000_0001n;
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
export interface TagMessage {
  /** the receive buffer (a view of exactly `length` bytes) */
  data: Buffer;
  length: number;
  senderTag: bigint;
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
