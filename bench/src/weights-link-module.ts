/**
 * (a) of the single-link benchmark (weights-link.ts): `@robustrl/ucx` itself, a peer process
 * (weights-link-server.js) holding the source region and this process pulling it with `endpoint.get`.
 */
import { spawn, ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ucx from '@robustrl/ucx';
import { LINK_READY, LINK_TAG, LinkDescriptor } from './weights-link-server';
import { collect, errMsg, markedLine, opTimeoutMs, processCpuMs, stopProcess, tailNote, track } from './weights-link-processes';
import { Round, roundOf } from './weights-link-rounds';
import { HOST, LINK_TRANSPORTS, LinkTransport } from './weights-link-types';

export interface ModuleRound extends Round {
  wakeups: number;
  peerWakeups: number | null;
  clientCpuMs: number;
  peerCpuMs: number | null;
}

/** A connected module link: the peer process, this process's worker, the RMA endpoint and both regions. */
export class ModuleLink {
  private constructor(
    private readonly server: ChildProcess,
    private readonly serverErr: () => string,
    private readonly worker: ucx.UcxWorker,
    private readonly ctl: ucx.Endpoint,
    private readonly ep: ucx.Endpoint,
    private readonly src: ucx.RemoteRegion,
    private readonly dst: ucx.MemoryRegion,
    private readonly sha256: string,
    readonly sizeBytes: number,
    readonly path: string,
    readonly rmaLanes: string,
  ) {}

  static async open(transport: LinkTransport, sizeBytes: number): Promise<ModuleLink> {
    const info = ucx.ucxInfo();
    if (!info.available) throw new Error(`@robustrl/ucx unavailable: ${info.reason ?? 'unknown reason'}`);
    const spec = LINK_TRANSPORTS[transport];
    // stdin is a pipe the server watches: it exits when this process goes away, however that happens.
    const server = track(
      spawn(process.execPath, [resolve(__dirname, 'weights-link-server.js'), String(sizeBytes), spec.tls], { stdio: ['pipe', 'pipe', 'pipe'] }),
    );
    const serverErr = collect(server.stderr);
    let worker: ucx.UcxWorker | undefined;
    try {
      // (the server's stderr tail is added to any error below)
      const ready = JSON.parse(await markedLine(server, 'weights-link-server', LINK_READY, opTimeoutMs(sizeBytes), () => '')) as { port: number };
      worker = new ucx.UcxWorker({ config: { TLS: spec.tls } });
      const ctl = await worker.connect(HOST, ready.port, { timeoutMs: 10_000 });
      const desc = JSON.parse((await worker.recvTag(LINK_TAG.desc, { timeoutMs: 10_000, maxLength: 64 * 1024 })).data.toString()) as LinkDescriptor;
      let ep = ctl;
      if (spec.endpoint === 'worker-address') {
        await ctl.sendTag(LINK_TAG.request, Buffer.from('worker-address'), { timeoutMs: 10_000 });
        ep = await worker.connectRma(ctl, { errorHandling: spec.errorHandling, timeoutMs: 10_000 });
      }
      const src = ep.remoteRegion(ucx.decodeRemoteRegion(Buffer.from(desc.region, 'base64')));
      if (src.length < sizeBytes) throw new Error(`peer region is ${src.length} bytes, expected ${sizeBytes}`);
      const dst = worker.mapAlloc(sizeBytes);
      const rmaLanes = ep
        .printInfo()
        .split('\n')
        .filter((l) => /rma_bw#/.test(l))
        .map((l) => l.replace(/^#\s*/, '').replace(/\s+/g, ' ').trim())
        .join('; ');
      const path = `${spec.endpoint === 'worker-address' ? 'worker-address ep (connectRma)' : 'sockaddr ep (connect)'}, errorHandling '${spec.errorHandling}', mapAlloc on both sides`;
      return new ModuleLink(server, serverErr, worker, ctl, ep, src, dst, desc.sha256, sizeBytes, path, rmaLanes);
    } catch (err) {
      worker?.close();
      await stopProcess(server);
      throw new Error(`${errMsg(err)}${tailNote(serverErr())}`);
    }
  }

  /** W warm-up GETs, then N timed GETs, one at a time. */
  async round(warmup: number, iterations: number, progress: (done: number) => void): Promise<ModuleRound> {
    const timeoutMs = opTimeoutMs(this.sizeBytes);
    const get = () => this.ep.get(this.dst, 0, this.src, 0, this.sizeBytes, { timeoutMs });
    try {
      for (let i = 0; i < warmup; i++) await get();
      const peerWakeups0 = await this.peerWakeups();
      const wakeups0 = this.worker.stats().wakeups;
      const cpu0 = process.cpuUsage();
      const peer0 = processCpuMs(this.server.pid);
      const times: number[] = [];
      let lastReport = performance.now();
      for (let i = 0; i < iterations; i++) {
        const t0 = performance.now();
        await get();
        const t1 = performance.now();
        times.push(t1 - t0);
        if (t1 - lastReport > 2000) {
          progress(i + 1);
          lastReport = t1;
        }
      }
      const cpu = process.cpuUsage(cpu0);
      const peer1 = processCpuMs(this.server.pid);
      const wakeups = this.worker.stats().wakeups - wakeups0;
      const peerWakeups1 = await this.peerWakeups();
      return {
        ...roundOf(this.sizeBytes, times),
        wakeups,
        peerWakeups: peerWakeups0 === null || peerWakeups1 === null ? null : peerWakeups1 - peerWakeups0,
        clientCpuMs: (cpu.user + cpu.system) / 1000,
        peerCpuMs: peer0 === null || peer1 === null ? null : peer1 - peer0,
      };
    } catch (err) {
      throw new Error(`${errMsg(err)}${tailNote(this.serverErr())}`);
    }
  }

  /** The peer worker's wake-up count so far (asked over the control endpoint), or null. */
  private async peerWakeups(): Promise<number | null> {
    try {
      await this.ctl.sendTag(LINK_TAG.request, Buffer.from('stats'), { timeoutMs: 5_000 });
      const m = await this.worker.recvTag(LINK_TAG.reply, { timeoutMs: 5_000, maxLength: 4096 });
      return (JSON.parse(m.data.toString()) as ucx.WorkerStats).wakeups;
    } catch {
      return null;
    }
  }

  /** Throws unless the local region holds the peer's bytes. */
  verify(): void {
    const got = createHash('sha256')
      .update(this.dst.buffer as Buffer)
      .digest('hex');
    if (got !== this.sha256) throw new Error('pulled bytes differ from the peer region (SHA-256 mismatch)');
  }

  async close(): Promise<void> {
    await this.ctl.sendTag(LINK_TAG.request, Buffer.from('bye'), { timeoutMs: 5_000 }).catch(() => undefined);
    await this.worker.recvTag(LINK_TAG.reply, { timeoutMs: 5_000, maxLength: 64 }).catch(() => undefined);
    this.worker.close();
    await stopProcess(this.server);
  }
}
