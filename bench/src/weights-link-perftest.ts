/**
 * (b) of the single-link benchmark (weights-link.ts): ucx_perftest, UCX's own C benchmark, as a server and
 * a client process per round; its output parsed and its bandwidth unit checked.
 */
import { spawn } from 'node:child_process';
import { collect, freePort, opTimeoutMs, runToExit, stopProcess, tailNote, track, waitListening } from './weights-link-processes';
import { Round } from './weights-link-rounds';
import { HOST, LINK_TRANSPORTS, LinkTransport, MIB } from './weights-link-types';

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

export interface PerftestRound extends Round {
  unit: 'MiB/s' | 'MB/s';
}

export function perftestCommand(transport: LinkTransport, sizeBytes: number, iterations: number, warmup: number, port: number) {
  const spec = LINK_TRANSPORTS[transport];
  const eh = spec.errorHandling === 'peer' ? ['-e'] : [];
  return {
    env: { ...process.env, UCX_TLS: spec.tls },
    serverArgs: ['-p', String(port), ...eh],
    clientArgs: [HOST, '-p', String(port), '-t', 'ucp_get', '-s', String(sizeBytes), '-n', String(iterations), '-w', String(warmup), '-f', ...eh],
  };
}

/** One ucx_perftest server + client run; throws with the reason when it cannot run or its output is not as expected. */
export async function perftestRound(bin: string, transport: LinkTransport, sizeBytes: number, iterations: number, warmup: number): Promise<PerftestRound> {
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
