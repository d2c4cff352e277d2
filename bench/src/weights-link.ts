/**
 * Single-link weight pull throughput — the first half of `npm run bench:weights` (weights.bench.ts), as a
 * reusable module: `measureSingleLink(opts)` measures, `formatSingleLink(results)` renders markdown.
 * This file runs the rounds; each tool is a file of its own: weights-link-module.ts (a),
 * weights-link-perftest.ts (b), weights-link-memcpy.ts (c); beside them weights-link-rounds.ts (per-round
 * statistics), weights-link-processes.ts (the child processes), weights-link-report.ts (the markdown) and
 * weights-link-types.ts (transports, options, results).
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
import { ModuleLink, ModuleRound } from './weights-link-module';
import { PerftestRound, perftestCommand, perftestRound } from './weights-link-perftest';
import { memcpyBuffers, memcpyRound } from './weights-link-memcpy';
import { errMsg } from './weights-link-processes';
import { fmtMiB } from './weights-link-report';
import { aggregate, pairedRatio, Round } from './weights-link-rounds';
import { fail, LINK_TRANSPORTS, LinkResult, Measured, MIB, ModuleDetail, PerftestDetail, SingleLinkOptions } from './weights-link-types';

export { formatSingleLink } from './weights-link-report';
export { parsePerftest, PerftestLine, perftestUnit } from './weights-link-perftest';
export {
  isLinkTransport,
  LINK_TRANSPORTS,
  LinkResult,
  LinkTransport,
  Measured,
  ModuleDetail,
  PerftestDetail,
  Ratio,
  SingleLinkOptions,
  Throughput,
  TransportSpec,
} from './weights-link-types';

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
