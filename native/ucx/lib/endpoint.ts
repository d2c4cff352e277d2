/** A UCP endpoint (C++: endpoint.cc, operation.cc): RMA GET/PUT, tagged sends, flush, close. */
import { mapError, type PeerUnreachableError, type UcxError, wrap, wrapSync } from './errors';
import { checkRemote, type MemoryRegion, RemoteKey, type RemoteRegion, type RemoteRegionDescriptor } from './memory-region';
import type { NativeEndpoint } from './native';
import type { EndpointState } from './types';

export interface OpOptions {
  /** reject with TimeoutError after this many ms (0/undefined = no timeout) */
  timeoutMs?: number;
}

const epWrappers = new WeakMap<NativeEndpoint, Endpoint>();
export function wrapEndpoint(n: NativeEndpoint): Endpoint {
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

/**
 * Whether a protocol description (Endpoint.getDescribed) is an emulation: UCX found no transport that
 * reaches the memory directly and copies it through a bounce buffer in software (for device memory
 * about 1000x slower than cuda_ipc's zero-copy).
 */
export function isEmulatedProtocol(description: string): boolean {
  return /emulation|software/i.test(description);
}
