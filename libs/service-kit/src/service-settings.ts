import { custom, int, oneOf, seconds, secondsOrOff } from '@robustrl/config';

/**
 * What every service reads from its environment through the service kit (docs/operators/configuration-reference.md):
 * its HTTP port and address, how its deciding consumer snapshots and forgets jobs, and the detector's shard.
 */
const owner = 'services';

/** Loopback: a service is reached from outside only where it is told to listen there (with tokens). */
export const DEFAULT_HTTP_HOST = '127.0.0.1';

/** One hour: a live job reports GPU activity and throughput every few seconds, so an hour of silence is a job that is gone. */
export const DEFAULT_IDLE_JOB_RETENTION_MS = 3_600_000;
/** Ten seconds: what a restart replays at most, against one snapshot write of every busy job per interval. */
export const DEFAULT_SNAPSHOT_INTERVAL_MS = 10_000;

export const HTTP_PORT = custom('ROBUSTRL_HTTP_PORT', {
  owner,
  meaning: "the service's HTTP port (health, metrics and its API), `off` for none",
  default: undefined,
  defaultText: '8081–8085 per service',
  accepted: "a port number or 'off'",
  parse: (raw): number | null | undefined => (raw === 'off' ? null : /^\d+$/.test(raw) && Number(raw) <= 65535 ? Number(raw) : undefined),
});
export const HTTP_HOST = custom('ROBUSTRL_HTTP_HOST', {
  owner,
  meaning: "the address the service's HTTP port binds: `0.0.0.0` in a container so probes and Prometheus reach it, then with tokens",
  default: DEFAULT_HTTP_HOST,
  accepted: 'an IP address or a host name to bind',
  parse: (raw) => raw,
});
export const JOB_STATE_RETENTION = secondsOrOff('ROBUSTRL_JOB_STATE_RETENTION_SECONDS', {
  owner,
  meaning: 'deciding services: a job silent this long leaves memory and the tick; its state comes back from its snapshot if it speaks again',
  default: DEFAULT_IDLE_JOB_RETENTION_MS / 1000,
});
export const SNAPSHOT_INTERVAL = seconds('ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS', {
  owner,
  meaning: 'how often a deciding service snapshots its states and commits its consumer offsets: what a restart replays at most',
  default: DEFAULT_SNAPSHOT_INTERVAL_MS / 1000,
});
export const SHARD = custom('ROBUSTRL_SHARD', {
  owner,
  meaning:
    "the detector: decide only the jobs on this shard's partitions, `<index>/<count>`, or `auto` with `ROBUSTRL_SHARD_COUNT` (the index from the hostname's ordinal)",
  default: undefined,
  defaultText: 'one shard',
  accepted: "<index>/<count> (e.g. 0/4) or 'auto'",
  parse: (raw) => (raw === 'auto' || /^\d+\/\d+$/.test(raw) ? raw : undefined),
});
export const SHARD_COUNT = int('ROBUSTRL_SHARD_COUNT', {
  owner,
  meaning: 'the shard count with `ROBUSTRL_SHARD=auto`',
  default: undefined,
  min: 1,
});
export const SHARD_LAYOUT_CHANGE = oneOf('ROBUSTRL_SHARD_LAYOUT_CHANGE', ['refuse', 'replay'], {
  owner,
  meaning: "the detector: `replay` to start a new shard count although the store holds another's state (from the beginning of the topics)",
  default: 'refuse',
});
