/**
 * Peer process of the single-link weight benchmark (`weights-link.ts`): it plays the side that holds the
 * weights. Spawned with `process.execPath`, never run by hand:
 *
 *   node bench/dist/weights-link-server.js <sizeBytes> <UCX_TLS>
 *
 * It allocates and registers a `sizeBytes` source region with `worker.mapAlloc` (UCX-allocated memory, so a
 * same-host peer can read it over the posix shared-memory lane, as ucx_perftest's buffers), fills it with a
 * pattern, listens on 127.0.0.1 (ephemeral port) and prints `<LINK_READY>{"port":N,"pid":P}` as one line on
 * stdout (UCX may print its warnings there too).
 * On each connection it sends the region (descriptor + SHA-256 of its bytes) on LINK_TAG.desc, then
 * answers requests on LINK_TAG.request:
 *   'worker-address' → worker.sendWorkerAddress(ep)   (the client's connectRma)
 *   'stats'          → JSON of worker.stats() on LINK_TAG.reply (the peer's wake-ups, for diagnostics)
 *   'bye'            → reply on LINK_TAG.reply, close the worker, exit 0
 * SIGTERM, or the end of stdin (the parent is gone), closes the worker and exits. Errors go to stderr and exit 1.
 */
import { createHash, randomFillSync } from 'node:crypto';
import * as ucx from '@robustrl/ucx';

/** Prefix of the ready line on stdout. */
export const LINK_READY = 'weights-link-server ready ';

/** Tags of the tiny control protocol (client in weights-link.ts). */
export const LINK_TAG = {
  desc: 0x5745_4947_4854_0001n,
  request: 0x5745_4947_4854_0002n,
  reply: 0x5745_4947_4854_0003n,
} as const;

export interface LinkDescriptor {
  /** encodeRemoteRegion(region.descriptor()), base64 */
  region: string;
  /** SHA-256 hex of the region's bytes, for the client's after-the-run check */
  sha256: string;
}

/** 16 MiB of random bytes repeated: cheap to produce for any size, not compressible, not all zero. */
function fillPattern(buf: Buffer): void {
  const chunk = Math.min(buf.length, 16 << 20);
  randomFillSync(buf, 0, chunk);
  for (let off = chunk; off < buf.length; off += chunk) buf.copy(buf, off, 0, Math.min(chunk, buf.length - off));
}

function main(): void {
  const size = Number(process.argv[2]);
  const tls = process.argv[3] ?? '';
  if (!Number.isSafeInteger(size) || size < 1) throw new Error(`bad size '${process.argv[2]}'`);
  const worker = new ucx.UcxWorker(tls ? { config: { TLS: tls } } : {});
  const region = worker.mapAlloc(size);
  const bytes = region.buffer as Buffer;
  fillPattern(bytes);
  const desc: LinkDescriptor = {
    region: ucx.encodeRemoteRegion(region.descriptor()).toString('base64'),
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
  const shutdown = (code: number) => {
    try {
      worker.close();
    } finally {
      process.exit(code);
    }
  };
  const listener = worker.listen({ host: '127.0.0.1', port: 0 }, (ep) => {
    ep.onError(() => undefined); // the client going away is not our error
    void (async () => {
      await ep.sendTag(LINK_TAG.desc, Buffer.from(JSON.stringify(desc)), { timeoutMs: 30_000 });
      for (;;) {
        const m = await worker.recvTag(LINK_TAG.request, { maxLength: 4096 });
        const op = m.data.toString();
        if (op === 'worker-address') await worker.sendWorkerAddress(ep, { timeoutMs: 30_000 });
        else if (op === 'stats') await ep.sendTag(LINK_TAG.reply, Buffer.from(JSON.stringify(worker.stats())), { timeoutMs: 5_000 });
        else if (op === 'bye') {
          await ep.sendTag(LINK_TAG.reply, Buffer.from('bye'), { timeoutMs: 5_000 }).catch(() => undefined);
          shutdown(0);
        } else throw new Error(`unknown request '${op}'`);
      }
    })().catch((err: unknown) => {
      if (err instanceof ucx.PeerUnreachableError || err instanceof ucx.EndpointClosedError) return;
      process.stderr.write(`weights-link-server: ${err instanceof Error ? err.message : String(err)}\n`);
      shutdown(1);
    });
  });
  process.on('SIGTERM', () => shutdown(0));
  // The parent holds our stdin: when it goes away (even SIGKILLed), stdin ends and so do we.
  process.stdin.on('end', () => shutdown(0));
  process.stdin.on('error', () => shutdown(0));
  process.stdin.resume();
  process.stdout.write(`${LINK_READY}${JSON.stringify({ port: listener.port, pid: process.pid })}\n`);
}

if (require.main === module) {
  try {
    main();
  } catch (err) {
    process.stderr.write(`weights-link-server: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
