/**
 * Single-link weight pull throughput — the first half of `npm run bench:weights` (weights.bench.ts), as a
 * reusable module: `measureSingleLink(opts)` measures, `formatSingleLink(results)` renders markdown.
 *
 * For each transport and one message size (default 64 MiB), in one run, three measurements:
 *  (a) module: `@robustrl/ucx`. A peer process (weights-link-server.js, spawned with process.execPath) maps
 *      the source region with `worker.mapAlloc`; this process pulls it into its own `mapAlloc` region with
 *      `endpoint.get` — W warm-up GETs, then N timed GETs, each awaited (one GET in flight, as a rollout
 *      pulling one tensor after another). After each round the pulled bytes are SHA-256-checked against
 *      the peer's.
 *      For the analysis, the result also carries the endpoint's rma_bw lanes (ep.printInfo()), the worker
 *      wake-ups per GET on both sides (worker.stats(); the peer's asked for over the control endpoint)
 *      and both processes' CPU time / wall time during the timed GETs.
 *  (b) ucx_perftest (UCX's own C benchmark, busy-polling): a server and a client process on 127.0.0.1 and
 *      a free port, the same UCX_TLS, `-t ucp_get -s SIZE -n N -w W -f`, plus `-e` when the module's
 *      endpoint uses peer error handling (tcp), so both run the same UCP error mode. Its "MB/s" columns are
 *      MiB/s (bytes / 2^20 / s); `perftestUnit` checks that against its latency columns on every run.
 *      It reports no per-iteration times: its median is SIZE / its 50th-percentile iteration latency, its
 *      mean is its "overall" bandwidth, and it has no best.
 *  (c) memcpy: `Buffer#copy` (V8 → memmove) of a SIZE buffer into another in this process, W + N times.
 *
 * Rounds. On the 2-vCPU VM this was written on, memory and loopback bandwidth drift by ±20 % over seconds
 * (other tenants, the local Kafka/PostgreSQL), and a 64 MiB copy's speed depends on where its pages landed.
 * One long phase per tool would mostly measure that. The measurements are therefore interleaved in R
 * rounds, each with fresh processes and regions for the module and ucx_perftest and fresh buffers for
 * memcpy (module and ucx_perftest swap order every round), each W warm-up + N timed iterations of each
 * tool. Per round and tool: the median MiB/s. Reported:
 * median = median of the round medians, best = fastest single iteration, mean = all bytes / all time.
 * Ratios are paired: module / ucx_perftest (and module / memcpy) of the round medians, round by round;
 * the table shows the median of those R ratios and their range.
 * UCX_* environment variables (e.g. UCX_TCP_TX_SEG_SIZE=64K) reach the module's workers in both processes
 * (ucp_config_read) and ucx_perftest alike, so a tuning can be compared like for like; the result lists
 * them. UCX_TLS is always the transport's.
 * A measurement that cannot run (no UCX addon, ucx_perftest missing or failing, a peer that dies) is
 * recorded with its reason, and the row says why.
 *
 * Transports (UCX_TLS on both sides, for the module via the worker config):
 *  - shm: `posix,cma,self,tcp`. posix is the shared-memory (mm) transport that moves the bytes: both
 *    regions come from ucp_mem_map(ALLOCATE), so a GET is one copy out of the peer's posix segment,
 *    done inside ucp_get_nbx (no wake-ups). cma (process_vm_readv) is what the same endpoint uses for
 *    plain registered Buffers, and is the lane `printInfo` names (the lane is chosen per rkey); self covers
 *    in-process loopback; tcp carries the sockaddr control endpoint (connection manager, tag messages)
 *    that bootstraps the RMA endpoint. The GETs run on a worker-address endpoint with errorHandling
 *    'none' (`worker.connectRma(ctl, { errorHandling: 'none' })`): on UCX 1.13 the error mode 'peer'
 *    excludes posix/sysv/cma. ucx_perftest (no -e) also uses 'none' and allocated memory, so the same lane.
 *    (`sm,self,tcp` would add sysv; the module README measured posix-only as slightly faster.)
 *  - tcp: `tcp`. The GETs run on the sockaddr endpoint (`worker.connect`, errorHandling 'peer'): the
 *    cross-host path, with peer-failure detection; ucx_perftest gets -e. UCX 1.13's tcp transport has no
 *    GET: `printInfo` lists rma_bw lanes but no get protocol, and UCP emulates the GET with active
 *    messages on the am lane (tcp/lo), the peer's worker sending the bytes in UCX_TCP_TX_SEG_SIZE (8 KiB)
 *    fragments. The same holds for ucx_perftest -e, whose worker-address ep has only the am lane.
 */
import { spawn, ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ucx from '@robustrl/ucx';
import { median } from './bench-kit';
import { LINK_READY, LINK_TAG, LinkDescriptor } from './weights-link-server';

const MIB = 1024 * 1024;
const HOST = '127.0.0.1';

export type LinkTransport = 'shm' | 'tcp';

export interface TransportSpec {
  /** UCX_TLS for both ends (module worker config and ucx_perftest's environment) */
  tls: string;
  /** which endpoint carries the module's GETs */
  endpoint: 'worker-address' | 'sockaddr';
  /** UCP error-handling mode of that endpoint; ucx_perftest gets `-e` for 'peer' */
  errorHandling: ucx.ErrorHandlingMode;
}

export const LINK_TRANSPORTS: Readonly<Record<LinkTransport, TransportSpec>> = {
  shm: { tls: 'posix,cma,self,tcp', endpoint: 'worker-address', errorHandling: 'none' },
  tcp: { tls: 'tcp', endpoint: 'sockaddr', errorHandling: 'peer' },
};

export function isLinkTransport(s: string): s is LinkTransport {
  return Object.prototype.hasOwnProperty.call(LINK_TRANSPORTS, s);
}

export interface SingleLinkOptions {
  /** bytes per GET / copy (default 64 MiB) */
  sizeBytes?: number;
  /** timed GETs / copies per round and tool (default 30); ucx_perftest -n */
  iterations?: number;
  /** untimed GETs / copies before each round's timed ones (default 3); ucx_perftest -w */
  warmup?: number;
  /** interleaved rounds (default 5) */
  rounds?: number;
  /** default ['shm', 'tcp'] */
  transports?: readonly LinkTransport[];
  /** ucx_perftest binary (default: env BENCH_UCX_PERFTEST, else `ucx_perftest` on PATH) */
  perftestPath?: string;
  /** progress lines (stderr in the bench) */
  progress?: (line: string) => void;
}

/** Throughput of one tool over all rounds, MiB/s. */
export interface Throughput {
  /** median of the per-round medians */
  medianMiBps: number;
  /** fastest single iteration; null where the tool does not report iterations (ucx_perftest) */
  bestMiBps: number | null;
  /** all bytes / all time */
  meanMiBps: number;
  /** each round's median */
  roundMedianMiBps: number[];
}

export type Measured<T> = ({ ok: true } & Throughput & T) | { ok: false; reason: string };

export interface ModuleDetail {
  /** how the GETs were issued */
  path: string;
  /** the endpoint's rma_bw lanes from ep.printInfo() */
  rmaLanes: string;
  /** uv_poll wake-ups per timed GET of this process's worker and of the peer's (null if it did not say) */
  wakeupsPerGet: { client: number; peer: number | null };
  /** CPU time / wall time during the timed GETs, this process (all threads) and the peer (Linux /proc; else null) */
  cpu: { client: number; peer: number | null };
}

export interface PerftestDetail {
  /** one round's command lines */
  command: string;
  /** what ucx_perftest's "MB/s" turned out to be (checked against its latencies every round) */
  unit: 'MiB/s' | 'MB/s';
}

export interface Ratio {
  /** median over rounds of (module round median / other round median) */
  median: number;
  min: number;
  max: number;
}

export interface LinkResult {
  transport: LinkTransport;
  tls: string;
  sizeBytes: number;
  iterations: number;
  warmup: number;
  rounds: number;
  /** UCX_* variables from the environment (but UCX_TLS, UCX_LOG_FILE): they apply to the module's workers and ucx_perftest alike */
  ucxEnv: Record<string, string>;
  module: Measured<ModuleDetail>;
  perftest: Measured<PerftestDetail>;
  memcpy: Measured<object>;
  /** null when either side failed */
  ratios: { modulePerPerftest: Ratio | null; modulePerMemcpy: Ratio | null };
}

const errMsg = (err: unknown) => (err instanceof Error ? err.message : String(err));
const fail = (reason: string) => ({ ok: false as const, reason });

/** One round of one tool. */
interface Round {
  medianMiBps: number;
  bestMiBps: number | null;
  bytes: number;
  seconds: number;
}

function roundOf(sizeBytes: number, timesMs: readonly number[]): Round {
  const mibps = (ms: number) => sizeBytes / MIB / (ms / 1000);
  return {
    medianMiBps: mibps(median(timesMs)),
    bestMiBps: mibps(Math.min(...timesMs)),
    bytes: sizeBytes * timesMs.length,
    seconds: timesMs.reduce((s, t) => s + t, 0) / 1000,
  };
}

function aggregate(rounds: readonly Round[]): Throughput {
  const bests = rounds.map((r) => r.bestMiBps);
  return {
    medianMiBps: median(rounds.map((r) => r.medianMiBps)),
    bestMiBps: bests.some((b) => b === null) ? null : Math.max(...(bests as number[])),
    meanMiBps: rounds.reduce((s, r) => s + r.bytes, 0) / MIB / rounds.reduce((s, r) => s + r.seconds, 0),
    roundMedianMiBps: rounds.map((r) => r.medianMiBps),
  };
}

function pairedRatio(a: readonly Round[], b: readonly Round[]): Ratio | null {
  if (a.length === 0 || a.length !== b.length) return null;
  const rs = a.map((r, i) => r.medianMiBps / b[i].medianMiBps);
  return { median: median(rs), min: Math.min(...rs), max: Math.max(...rs) };
}

/**
 * Resolves with the rest of the first stdout line that starts with `marker` (UCX may print its own warnings
 * on stdout first); rejects when the process exits or the deadline passes first.
 */
async function markedLine(proc: ChildProcess, what: string, marker: string, timeoutMs: number, stderrTail: () => string): Promise<string> {
  return new Promise<string>((resolveLine, reject) => {
    let buf = '';
    const done = (err: Error | null, line?: string) => {
      clearTimeout(timer);
      proc.stdout!.off('data', onData);
      proc.off('close', onExit);
      proc.off('error', onError);
      if (err) reject(err);
      else resolveLine(line!);
    };
    const onData = (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith(marker)) return done(null, line.slice(marker.length));
      }
    };
    const onExit = (code: number | null, signal: string | null) =>
      done(new Error(`${what} exited (${signal ?? `code ${code}`}) before it was ready${tailNote(stderrTail())}`));
    const onError = (err: Error) => done(new Error(`${what} could not start: ${err.message}`));
    const timer = setTimeout(() => done(new Error(`${what} not ready after ${timeoutMs} ms${tailNote(stderrTail())}`)), timeoutMs);
    proc.stdout!.on('data', onData);
    proc.once('close', onExit); // 'close': after stdout/stderr ended, so the stderr tail is complete
    proc.once('error', onError);
  });
}

/** The last lines of a process's output for an error message; for a UCX crash report, its signal line and top frames. */
function tailNote(text: string): string {
  const lines = text.trim().split('\n');
  const crash = lines.findIndex((l) => /Caught signal/.test(l));
  const pick =
    crash >= 0
      ? [
          lines[crash],
          ...lines
            .slice(crash + 1)
            .filter((l) => /^\s*\d+\s/.test(l))
            .slice(0, 6),
        ]
      : lines.slice(-3);
  const t = pick
    .map((l) => l.trim().replace(/\s+/g, ' '))
    .join(' | ')
    .slice(-1200);
  return t ? `: ${t}` : '';
}

/** Collects a stream's last 16 KiB. */
function collect(stream: NodeJS.ReadableStream | null): () => string {
  let text = '';
  stream?.on('data', (d: Buffer) => {
    text = (text + d.toString()).slice(-16384);
  });
  return () => text;
}

async function stopProcess(proc: ChildProcess, graceMs = 3000): Promise<void> {
  if (proc.pid === undefined || proc.exitCode !== null || proc.signalCode !== null) return; // never started, or gone
  const exited = once(proc, 'exit').catch(() => undefined);
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Children still running; killed when this process exits (process.exit, also from a signal handler), so none is orphaned. */
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;

function track(proc: ChildProcess): ChildProcess {
  liveChildren.add(proc);
  proc.once('exit', () => liveChildren.delete(proc));
  proc.once('error', () => liveChildren.delete(proc));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const p of liveChildren) p.kill('SIGKILL');
    });
  }
  return proc;
}

/** A TCP port that was free a moment ago (ucx_perftest needs a fixed -p). */
async function freePort(): Promise<number> {
  const srv = createServer();
  srv.listen(0, HOST);
  await once(srv, 'listening');
  const { port } = srv.address() as { port: number };
  srv.close();
  await once(srv, 'close');
  return port;
}

/** Per-operation deadline: generous (a 10 MiB/s floor, at least 60 s), only to turn a hang into an error. */
const opTimeoutMs = (sizeBytes: number) => Math.max(60_000, Math.ceil(sizeBytes / (10 * MIB)) * 1000);

/** CPU time (user + system) of another process in ms, from /proc/<pid>/stat (USER_HZ = 100); null if unreadable. */
function processCpuMs(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------------
// (a) the module

interface ModuleRound extends Round {
  wakeups: number;
  peerWakeups: number | null;
  clientCpuMs: number;
  peerCpuMs: number | null;
}

/** A connected module link: the peer process, this process's worker, the RMA endpoint and both regions. */
class ModuleLink {
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

// ---------------------------------------------------------------------------------------------------
// (b) ucx_perftest

/** The numbers of ucx_perftest's final line (`-f`): iterations, latency p50/avg/overall (µs), bandwidth avg/overall, msg rate avg/overall. */
export interface PerftestLine {
  iterations: number;
  latencyP50Us: number;
  latencyOverallUs: number;
  bandwidthOverall: number;
}

/**
 * Parses the last result row of ucx_perftest's output (with or without the `Final:` label): 8 columns,
 * of which the "average" ones (the last report interval) may read `inf`/`nan`; the ones used must be numbers.
 */
export function parsePerftest(output: string): PerftestLine | null {
  const rows = output
    .split('\n')
    .map((l) =>
      l
        .replace(/^\s*Final:/, '')
        .trim()
        .split(/\s+/),
    )
    .filter((f) => f.length === 8 && /^\d+$/.test(f[0]) && f.every((x) => /^([\d.]+|inf|-?nan)$/i.test(x)));
  const f = rows.at(-1);
  if (!f) return null;
  const line = { iterations: Number(f[0]), latencyP50Us: Number(f[1]), latencyOverallUs: Number(f[3]), bandwidthOverall: Number(f[5]) };
  return Object.values(line).every((x) => Number.isFinite(x) && x > 0) ? line : null;
}

/**
 * ucx_perftest prints "MB/s"; in UCX 1.13 that is bytes / 2^20 / s. Rather than trust the label, compare
 * the overall bandwidth with size / overall latency in both units and take the one that matches.
 */
export function perftestUnit(line: PerftestLine, sizeBytes: number): 'MiB/s' | 'MB/s' | null {
  const bytesPerS = sizeBytes / (line.latencyOverallUs / 1e6);
  const close = (x: number) => Math.abs(x - line.bandwidthOverall) <= 0.02 * line.bandwidthOverall;
  if (close(bytesPerS / MIB)) return 'MiB/s';
  if (close(bytesPerS / 1e6)) return 'MB/s';
  return null;
}

/** Whether something listens on TCP `port` (Linux /proc/net/tcp{,6}); null where that cannot be read. */
function isListening(port: number): boolean | null {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let readable = false;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    readable = true;
    // "  sl  local_address rem_address   st ..." — st 0A = LISTEN
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 3 && f[1].endsWith(hex) && f[3] === '0A') return true;
    }
  }
  return readable ? false : null;
}

/** 'listening', or why not: the process failed to start or exited, or the deadline passed. */
async function waitListening(proc: ChildProcess, port: number, timeoutMs: number): Promise<string> {
  let startError: string | null = null;
  proc.once('error', (err) => (startError = err.message));
  const deadline = Date.now() + timeoutMs;
  const started = Date.now();
  for (;;) {
    if (startError) return `could not start: ${startError}`;
    if (proc.exitCode !== null || proc.signalCode !== null) return `exited (${proc.signalCode ?? `code ${proc.exitCode}`}) before listening`;
    const l = isListening(port);
    if (l === true) return 'listening';
    if (l === null && Date.now() - started >= 1000) return 'listening'; // no /proc: give it a second
    if (Date.now() > deadline) return `not listening on port ${port} after ${timeoutMs} ms`;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function runToExit(proc: ChildProcess, timeoutMs: number): Promise<{ code: number | null; signal: string | null; timedOut: boolean }> {
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill('SIGKILL');
  }, timeoutMs);
  try {
    const [code, signal] = (await once(proc, 'exit')) as [number | null, string | null];
    return { code, signal, timedOut };
  } finally {
    clearTimeout(timer);
  }
}

interface PerftestRound extends Round {
  unit: 'MiB/s' | 'MB/s';
}

function perftestCommand(transport: LinkTransport, sizeBytes: number, iterations: number, warmup: number, port: number) {
  const spec = LINK_TRANSPORTS[transport];
  const eh = spec.errorHandling === 'peer' ? ['-e'] : [];
  return {
    env: { ...process.env, UCX_TLS: spec.tls },
    serverArgs: ['-p', String(port), ...eh],
    clientArgs: [HOST, '-p', String(port), '-t', 'ucp_get', '-s', String(sizeBytes), '-n', String(iterations), '-w', String(warmup), '-f', ...eh],
  };
}

/** One ucx_perftest server + client run; throws with the reason when it cannot run or its output is not as expected. */
async function perftestRound(bin: string, transport: LinkTransport, sizeBytes: number, iterations: number, warmup: number): Promise<PerftestRound> {
  const { env, serverArgs, clientArgs } = perftestCommand(transport, sizeBytes, iterations, warmup, await freePort());
  const server = track(spawn(bin, serverArgs, { env, stdio: ['ignore', 'pipe', 'pipe'] }));
  const serverErr = collect(server.stderr);
  const serverOut = collect(server.stdout);
  try {
    // Wait until the server listens. Its "Waiting for connection..." line sits in stdio's buffer while
    // stdout is a pipe, so look for the listening socket in /proc/net/tcp{,6} (Linux) instead.
    const ready = await waitListening(server, Number(serverArgs[1]), 15_000);
    if (ready !== 'listening') {
      if (/ENOENT/.test(ready)) throw new Error(`not found ('${bin}'; install ucx-utils, or set BENCH_UCX_PERFTEST)`);
      throw new Error(`ucx_perftest server ${ready}${tailNote(serverErr() + serverOut())}`);
    }
    const client = track(spawn(bin, clientArgs, { env, stdio: ['ignore', 'pipe', 'pipe'] }));
    const out = collect(client.stdout);
    const err = collect(client.stderr);
    client.on('error', () => undefined);
    const exit = await runToExit(client, opTimeoutMs(sizeBytes) * (iterations + warmup));
    if (exit.timedOut) throw new Error(`ucx_perftest client timed out${tailNote(err() + out())}`);
    if (exit.code !== 0) throw new Error(`ucx_perftest client failed (${exit.signal ?? `exit ${exit.code}`})${tailNote(err() + out())}`);
    const line = parsePerftest(out());
    if (!line) throw new Error(`could not parse ucx_perftest output${tailNote(out() + err())}`);
    if (line.iterations !== iterations) throw new Error(`ucx_perftest ran ${line.iterations} iterations, expected ${iterations}`);
    const unit = perftestUnit(line, sizeBytes);
    if (!unit) throw new Error(`ucx_perftest bandwidth ${line.bandwidthOverall} matches neither MiB/s nor MB/s of size / latency`);
    return {
      medianMiBps: sizeBytes / MIB / (line.latencyP50Us / 1e6),
      bestMiBps: null,
      bytes: sizeBytes * iterations,
      seconds: (line.latencyOverallUs * iterations) / 1e6,
      unit,
    };
  } finally {
    await stopProcess(server, 1000);
  }
}

// ---------------------------------------------------------------------------------------------------
// (c) memcpy

/** Two SIZE buffers, every page touched. */
function memcpyBuffers(sizeBytes: number): { src: Buffer; dst: Buffer } {
  const src = Buffer.allocUnsafeSlow(sizeBytes);
  for (let off = 0; off < sizeBytes; off += 4096) src[off] = (off >>> 12) & 0xff;
  return { src, dst: Buffer.allocUnsafeSlow(sizeBytes).fill(1) };
}

function memcpyRound(bufs: { src: Buffer; dst: Buffer }, warmup: number, iterations: number): Round {
  const { src, dst } = bufs;
  for (let i = 0; i < warmup; i++) src.copy(dst);
  const times: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    src.copy(dst);
    times.push(performance.now() - t0);
  }
  if (!dst.equals(src)) throw new Error('destination differs from source after the copies');
  return roundOf(src.length, times);
}

// ---------------------------------------------------------------------------------------------------

const fmtMiB = (x: number | null) => (x === null ? '—' : Math.round(x).toLocaleString('en-US'));

/**
 * Measures the module, ucx_perftest and memcpy for each transport in interleaved rounds. Never throws for
 * a measurement that cannot run: that measurement is `{ ok: false, reason }` (its remaining rounds skipped).
 */
export async function measureSingleLink(opts: SingleLinkOptions = {}): Promise<LinkResult[]> {
  const sizeBytes = opts.sizeBytes ?? 64 * MIB;
  const iterations = opts.iterations ?? 30;
  const warmup = opts.warmup ?? 3;
  const rounds = opts.rounds ?? 5;
  const transports = opts.transports ?? (['shm', 'tcp'] as const);
  const bin = opts.perftestPath ?? process.env.BENCH_UCX_PERFTEST ?? 'ucx_perftest';
  const progress = opts.progress ?? (() => undefined);
  if (!Number.isSafeInteger(sizeBytes) || sizeBytes < 1) throw new RangeError(`sizeBytes must be a positive integer, got ${sizeBytes}`);
  if (!Number.isInteger(iterations) || iterations < 1) throw new RangeError(`iterations must be >= 1, got ${iterations}`);
  if (!Number.isInteger(warmup) || warmup < 0) throw new RangeError(`warmup must be >= 0, got ${warmup}`);
  if (!Number.isInteger(rounds) || rounds < 1) throw new RangeError(`rounds must be >= 1, got ${rounds}`);
  const sizeLabel = sizeBytes % MIB === 0 ? `${sizeBytes / MIB} MiB` : `${sizeBytes} B`;

  const ucxEnv = Object.fromEntries(
    Object.entries(process.env).filter(
      (e): e is [string, string] => e[0].startsWith('UCX_') && !['UCX_TLS', 'UCX_LOG_FILE'].includes(e[0]) && e[1] !== undefined,
    ),
  );
  // UCX logs (warnings such as "unused env variable") go to stdout by default, where they would mix with
  // the bench's tables/JSON and with ucx_perftest's numbers. Unless told otherwise, send them to stderr:
  // this process's UCX reads it when the addon is first loaded, the children inherit it.
  if (process.env.UCX_LOG_FILE === undefined) process.env.UCX_LOG_FILE = 'stderr';
  const results: LinkResult[] = [];
  for (const transport of transports) {
    const spec = LINK_TRANSPORTS[transport];
    const tag = `${transport}`;
    progress(`${tag}: ${rounds} rounds of ${warmup} warm-up + ${iterations} × ${sizeLabel} per tool; UCX_TLS=${spec.tls}, module on the ${spec.endpoint} ep`);
    const mod: ModuleRound[] = [];
    const pt: PerftestRound[] = [];
    const mc: Round[] = [];
    let modFailure: string | null = null;
    let ptFailure: string | null = null;
    let mcFailure: string | null = null;

    let linkInfo: { path: string; rmaLanes: string } | undefined;
    const runModule = async (r: number) => {
      if (modFailure) return;
      // A fresh peer, connection and regions every round, as ucx_perftest gets fresh processes: where
      // the pages land moves a 64 MiB copy by ±10 % here, and that should not favour either tool.
      let link: ModuleLink | undefined;
      try {
        link = await ModuleLink.open(transport, sizeBytes);
        linkInfo ??= { path: link.path, rmaLanes: link.rmaLanes };
        mod.push(await link.round(warmup, iterations, (done) => progress(`${tag} round ${r}: module GET ${done}/${iterations}`)));
        link.verify();
      } catch (err) {
        modFailure = errMsg(err);
      } finally {
        await link?.close().catch(() => undefined);
      }
    };
    const runPerftest = async () => {
      if (ptFailure) return;
      for (let attempt = 1; ; attempt++) {
        try {
          pt.push(await perftestRound(bin, transport, sizeBytes, iterations, warmup));
          return;
        } catch (err) {
          // The free port may have been taken between freePort() and ucx_perftest's bind: try another once.
          if (attempt < 2 && /before listening/.test(errMsg(err))) continue;
          ptFailure = errMsg(err);
          return;
        }
      }
    };
    for (let r = 1; r <= rounds; r++) {
      // Swap the order every round, so a drift in one direction does not favour either tool.
      if (r % 2 === 1) {
        await runModule(r);
        await runPerftest();
      } else {
        await runPerftest();
        await runModule(r);
      }
      if (!mcFailure) {
        try {
          mc.push(memcpyRound(memcpyBuffers(sizeBytes), warmup, iterations)); // fresh buffers, as the others get
        } catch (err) {
          mcFailure = errMsg(err);
        }
      }
      const last = (xs: readonly Round[], failure: string | null) => (failure ? 'failed' : xs.length === r ? fmtMiB(xs[r - 1].medianMiBps) : '—');
      progress(`${tag} round ${r}/${rounds} median MiB/s: module ${last(mod, modFailure)}, ucx_perftest ${last(pt, ptFailure)}, memcpy ${last(mc, mcFailure)}`);
    }
    if (modFailure) progress(`${tag}: module failed: ${modFailure}`);
    if (ptFailure) progress(`${tag}: ucx_perftest failed: ${ptFailure}`);

    const example = perftestCommand(transport, sizeBytes, iterations, warmup, 0);
    const module: Measured<ModuleDetail> =
      modFailure || !linkInfo
        ? fail(modFailure ?? 'no link')
        : {
            ok: true,
            ...aggregate(mod),
            ...linkInfo,
            wakeupsPerGet: {
              client: mod.reduce((s, r) => s + r.wakeups, 0) / (mod.length * iterations),
              peer: mod.some((r) => r.peerWakeups === null) ? null : mod.reduce((s, r) => s + (r.peerWakeups as number), 0) / (mod.length * iterations),
            },
            cpu: {
              client: mod.reduce((s, r) => s + r.clientCpuMs, 0) / (1000 * mod.reduce((s, r) => s + r.seconds, 0)),
              peer: mod.some((r) => r.peerCpuMs === null)
                ? null
                : mod.reduce((s, r) => s + (r.peerCpuMs as number), 0) / (1000 * mod.reduce((s, r) => s + r.seconds, 0)),
            },
          };
    const perftest: Measured<PerftestDetail> = ptFailure
      ? fail(ptFailure)
      : {
          ok: true,
          ...aggregate(pt),
          command: `UCX_TLS=${spec.tls} ${bin} ${example.serverArgs.join(' ').replace('-p 0', '-p PORT')} & UCX_TLS=${spec.tls} ${bin} ${example.clientArgs.join(' ').replace('-p 0', '-p PORT')}`,
          unit: pt[0].unit,
        };
    const memcpy: Measured<object> = mcFailure ? fail(mcFailure) : { ok: true, ...aggregate(mc) };
    results.push({
      transport,
      tls: spec.tls,
      sizeBytes,
      iterations,
      warmup,
      rounds,
      ucxEnv,
      module,
      perftest,
      memcpy,
      ratios: {
        modulePerPerftest: module.ok && perftest.ok ? pairedRatio(mod, pt) : null,
        modulePerMemcpy: module.ok && memcpy.ok ? pairedRatio(mod, mc) : null,
      },
    });
  }
  return results;
}

const fmtRatio = (r: Ratio | null) => (r === null ? '—' : `${r.median.toFixed(2)}x (${r.min.toFixed(2)}–${r.max.toFixed(2)})`);

/** Markdown: one table row per transport, then notes (failures with their reasons, lanes, CPU, commands). */
export function formatSingleLink(results: readonly LinkResult[]): string {
  if (results.length === 0) return 'no transports measured\n';
  const r0 = results[0];
  const size = r0.sizeBytes % MIB === 0 ? `${r0.sizeBytes / MIB} MiB` : `${r0.sizeBytes} B`;
  const cell = (m: Measured<object>) => (m.ok ? `${fmtMiB(m.medianMiBps)} / ${fmtMiB(m.bestMiBps)} / ${fmtMiB(m.meanMiBps)}` : 'failed¹');
  const lines = [
    `One GET (or copy) of ${size} at a time; ${r0.rounds} interleaved rounds of ${r0.warmup} warm-up + ${r0.iterations} timed per tool. ` +
      'MiB/s as median (of the round medians) / best / mean; ratios: median of the per-round ratios (min–max).',
    ...(Object.keys(r0.ucxEnv).length
      ? [
          `UCX settings from the environment, applied to both the module and ucx_perftest: ${Object.entries(r0.ucxEnv)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ')}.`,
        ]
      : []),
    '',
    '| transport | UCX_TLS | module | ucx_perftest | memcpy | module / ucx_perftest | module / memcpy |',
    '|---|---|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.transport} | \`${r.tls}\` | ${cell(r.module)} | ${cell(r.perftest)} | ${cell(r.memcpy)} | ${fmtRatio(r.ratios.modulePerPerftest)} | ${fmtRatio(r.ratios.modulePerMemcpy)} |`,
    );
  }
  const notes: string[] = [];
  for (const r of results) {
    for (const [name, m] of [
      ['module', r.module],
      ['ucx_perftest', r.perftest],
      ['memcpy', r.memcpy],
    ] as const) {
      if (!m.ok) notes.push(`- ¹ ${r.transport} ${name}: ${m.reason}`);
    }
    if (r.module.ok) {
      const m = r.module;
      const pct = (x: number | null) => (x === null ? 'n/a' : `${Math.round(x * 100)} %`);
      notes.push(
        `- ${r.transport} module: ${m.path}; rma_bw lanes: ${m.rmaLanes || '(none)'}; ` +
          `worker wake-ups per GET: this process ${fmtMiB(m.wakeupsPerGet.client)}, peer ${fmtMiB(m.wakeupsPerGet.peer)}; ` +
          `CPU during the GETs: this process ${pct(m.cpu.client)}, peer ${pct(m.cpu.peer)}; ` +
          `bytes SHA-256-verified; round medians ${m.roundMedianMiBps.map(fmtMiB).join(', ')}`,
      );
    }
    if (r.perftest.ok) {
      notes.push(
        `- ${r.transport} ucx_perftest: \`${r.perftest.command}\` (its "MB/s" is ${r.perftest.unit}; median from its p50 latency, no best); ` +
          `round medians ${r.perftest.roundMedianMiBps.map(fmtMiB).join(', ')}`,
      );
    }
  }
  return `${lines.join('\n')}\n\n${notes.join('\n')}\n`;
}
