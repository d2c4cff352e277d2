/**
 * Registered memory (C++: mapping.cc) and the keys peers use to reach it (remote_key.cc), with the
 * descriptors exchanged between peers (e.g. over a tag message) and the range checks of GET/PUT.
 */
import { requireGpu } from './cuda';
import { wrapSync } from './errors';
import type { NativeMapping, NativeRemoteKey } from './native';
import type { MemoryType, RegionAccess } from './types';

export interface RegionOptions {
  access?: RegionAccess;
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

function checkLocal(r: MemoryRegion, off: number, len: number): void {
  if (!Number.isSafeInteger(off) || !Number.isSafeInteger(len) || off < 0 || len < 0 || off + len > r.length)
    throw new RangeError(`range [${off}, ${off + len}) outside the region of ${r.length} bytes`);
}

export function checkRemote(r: RemoteRegion, off: number, len: number): void {
  if (!Number.isSafeInteger(off) || !Number.isSafeInteger(len) || off < 0 || len < 0 || off + len > r.length)
    throw new RangeError(`remote range [${off}, ${off + len}) outside remote region of ${r.length} bytes`);
}

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
