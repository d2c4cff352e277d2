/**
 * The single-link weight benchmark's (weights-link.ts) transports, options and result shapes: the leaf
 * the measuring and reporting files share.
 */
import * as ucx from '@robustrl/ucx';

export const MIB = 1024 * 1024;
export const HOST = '127.0.0.1';

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

export const fail = (reason: string) => ({ ok: false as const, reason });
