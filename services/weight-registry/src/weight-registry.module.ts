import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { identitySecretFromEnv, MessageBus, PublicationVoucher, PullGrantSealer } from '@robustrl/bus';
import { DataOf, Draft, Topics } from '@robustrl/contracts';
import { CLOCK, DecidingConsumer, EVENT_STORE, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import {
  createWeightRegistryDecider,
  WEIGHT_REGISTRY_INPUT_TYPES,
  WeightRegistryEvent,
  WeightRegistryInput,
  WeightRegistryOptions,
  WeightRegistryState,
} from '@robustrl/weight-registry-domain';

/**
 * ROBUSTRL_WEIGHT_RELAYS=off: every rollout pulls from the trainer (the baseline, for comparison);
 * ROBUSTRL_WEIGHT_RETAIN_VERSIONS: how many newest versions are kept (K, default 2);
 * ROBUSTRL_WEIGHT_PUBLICATION_GRACE_SECONDS: how long a publication waits for the roster to say its
 * publisher is a trainer before it is refused (default 30).
 */
export function weightRegistryOptionsFromEnv(env: NodeJS.ProcessEnv): WeightRegistryOptions {
  const relays = env.ROBUSTRL_WEIGHT_RELAYS ?? 'on';
  if (relays !== 'on' && relays !== 'off') throw new Error(`ROBUSTRL_WEIGHT_RELAYS must be on or off, got ${JSON.stringify(relays)}`);
  const retain = env.ROBUSTRL_WEIGHT_RETAIN_VERSIONS;
  const retainVersions = retain === undefined || retain === '' ? undefined : Number(retain);
  if (retainVersions !== undefined && !(Number.isInteger(retainVersions) && retainVersions >= 1)) {
    throw new Error(`ROBUSTRL_WEIGHT_RETAIN_VERSIONS must be a whole number ≥ 1, got ${JSON.stringify(retain)}`);
  }
  const grace = env.ROBUSTRL_WEIGHT_PUBLICATION_GRACE_SECONDS;
  const graceSeconds = grace === undefined || grace === '' ? undefined : Number(grace);
  if (graceSeconds !== undefined && !(Number.isFinite(graceSeconds) && graceSeconds > 0)) {
    throw new Error(`ROBUSTRL_WEIGHT_PUBLICATION_GRACE_SECONDS must be a number of seconds > 0, got ${JSON.stringify(grace)}`);
  }
  return { relays: relays === 'on', retainVersions, ...(graceSeconds !== undefined ? { publicationGraceMs: Math.round(graceSeconds * 1000) } : {}) };
}

/**
 * Weight registry: weight versions, which instance holds which buckets, the relay set, and
 * point-to-point pull scheduling (paper §5.2.1, §5.2.2). The rules are the decider in `registry/`;
 * this is the shell. The data plane is the agents' (services/agent/src/weights): they publish manifests,
 * carry out the pulls it assigns over UCX and report each bucket.
 */
export const WEIGHT_REGISTRY_INPUTS = [Topics.membership, Topics.weights, Topics.verdicts, Topics.control] as const;

@Module({})
export class WeightRegistryModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly consumer: DecidingConsumer<WeightRegistryState, WeightRegistryEvent, WeightRegistryInput>;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, @Inject(EVENT_STORE) store: EventStore, @Optional() @Inject(CLOCK) clock: (() => number) | null) {
    this.consumer = new DecidingConsumer(bus, store, {
      consumer: 'weight-registry',
      topics: WEIGHT_REGISTRY_INPUTS,
      inputTypes: WEIGHT_REGISTRY_INPUT_TYPES,
      decider: createWeightRegistryDecider(weightRegistryOptionsFromEnv(process.env)),
      // Time passing refuses a publication held past its grace though nothing else arrives (publication-authority.ts).
      tickIntervalMs: 5_000,
      clock: clock ?? undefined,
      completeDraft: pullGrantsFromEnv(process.env),
    });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.consumer.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.consumer.stop();
  }
}

/**
 * With identity on, every assignment carries its pull's grant, sealed for the puller and the source
 * (libs/bus/src/identity/pull-grants.ts): a weight server hands its region only against it; and the
 * registry's tag over the digest of the publication it accepted (publication-vouchers.ts): the puller
 * lays its copy out from that manifest and no other.
 */
export function pullGrantsFromEnv(env: NodeJS.ProcessEnv): ((draft: Draft) => Draft) | undefined {
  const secret = identitySecretFromEnv(env);
  if (secret === undefined) return undefined;
  const sealer = new PullGrantSealer(secret);
  const voucher = new PublicationVoucher(secret);
  return (draft) => {
    if (draft.type !== 'WeightPullAssigned') return draft;
    const d = draft.data as DataOf<'WeightPullAssigned'>;
    const grant = { ...sealer.seal(d), ...(d.publication ? { publicationTag: voucher.vouch({ ...d, publication: d.publication }) } : {}) };
    return { ...draft, data: { ...d, grant } } as Draft;
  };
}
