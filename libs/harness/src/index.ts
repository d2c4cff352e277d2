/**
 * The harness robustrl's chaos campaigns, benches and end-to-end tests run on (docs/contributors/chaos.md):
 * private infrastructure (chaos/private-infra.ts: a broker, PostgreSQL, service mains as processes),
 * machines as network namespaces (hosts/), the campaigns' faults, jobs, invariants and scorecards
 * (chaos/), real inference engines (engines/) and the recovery-latency run (recovery-latency.ts).
 *
 * Process scripts are not exported: bare-relay.ts (a relay process the recovery-latency run starts) and
 * chaos/skewed-clock.ts (preloaded into a campaign agent), both run from libs/harness/dist.
 */
export * from './bare-relay-table';
export * from './chaos/campaign-checks';
export * from './chaos/campaign-env';
export * from './chaos/campaign-options';
export * from './chaos/campaign-plane';
export * from './chaos/campaign-record';
export * from './chaos/campaign-settings';
export * from './chaos/campaign-view';
export * from './chaos/chaos-job';
export * from './chaos/class-scorecard';
export * from './chaos/cluster-faults';
export * from './chaos/cluster-invariants';
export * from './chaos/degraded-faults';
export * from './chaos/fault-host';
export * from './chaos/fault-injector';
export * from './chaos/fault-schedule';
export * from './chaos/grpo-invariants';
export * from './chaos/grpo-job';
export * from './chaos/infra-agent-scenario';
export * from './chaos/infra-chaos-options';
export * from './chaos/infra-chaos';
export * from './chaos/infra-observer';
export * from './chaos/infra-scorecard';
export * from './chaos/infra-store-reader';
export * from './chaos/infra-wait';
export * from './chaos/latency-proxy';
export * from './chaos/observed-ettr';
export * from './chaos/observed-sampler';
export * from './chaos/partition-faults';
export * from './chaos/partitions';
export * from './chaos/pass-rate-chart';
export * from './chaos/planned-faults';
export * from './chaos/planned-scorecard';
export * from './chaos/private-infra';
export * from './chaos/reference-job';
export * from './chaos/services-ready';
export * from './chaos/step-target';
export * from './chaos/synthetic-job';
export * from './chaos/system-chaos';
export * from './chaos/system-invariants';
export * from './chaos/system-scorecard';
export * from './chaos/timed-faults';
export * from './chaos/wait-until';
export * from './engines/llama-server';
export * from './engines/vllm-server';
export * from './hosts/netns-hosts';
export * from './recovery-baseline';
export * from './recovery-latency-types';
export * from './recovery-latency';
export * from './recovery-observer';
// Two campaigns name their check `Check` (the same shape): the whole-system campaign's is the package's.
export type { Check } from './chaos/system-invariants';
