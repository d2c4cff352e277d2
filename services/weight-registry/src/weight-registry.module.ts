import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { identitySecretFromEnv, MessageBus, PublicationVoucher, PullGrantSealer } from '@robustrl/bus';
import { DataOf, Draft, Topics } from '@robustrl/contracts';
import { int, onOff, seconds } from '@robustrl/config';
import { CLOCK, DecidingConsumer, EVENT_STORE, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import {
  createWeightRegistryDecider,
  DEFAULT_RETAINED_VERSIONS,
  PUBLICATION_GRACE_MS,
  WEIGHT_REGISTRY_INPUT_TYPES,
  WeightRegistryEvent,
  WeightRegistryInput,
  WeightRegistryOptions,
  WeightRegistryState,
} from '@robustrl/weight-registry-domain';

const owner = 'weight-registry';
export const WEIGHT_RELAYS = onOff('ROBUSTRL_WEIGHT_RELAYS', {
  owner,
  meaning: '`off`: every rollout pulls from the trainer (the baseline, for comparison); `on`: rollouts serve what they hold (paper §5.2.1)',
  default: true,
});
export const RETAIN_VERSIONS = int('ROBUSTRL_WEIGHT_RETAIN_VERSIONS', {
  owner,
  meaning: 'how many newest weight versions are kept (K)',
  default: DEFAULT_RETAINED_VERSIONS,
  min: 1,
});
export const PUBLICATION_GRACE = seconds('ROBUSTRL_WEIGHT_PUBLICATION_GRACE_SECONDS', {
  owner,
  meaning: 'how long a publication waits for the roster to say its publisher is a trainer before it is refused',
  default: PUBLICATION_GRACE_MS / 1000,
});

/** The registry's options from the readers above; a bad value stops start-up naming the variable. */
export function weightRegistryOptionsFromEnv(env: NodeJS.ProcessEnv): WeightRegistryOptions {
  return {
    relays: WEIGHT_RELAYS.read(env),
    retainVersions: RETAIN_VERSIONS.read(env),
    publicationGraceMs: Math.round(PUBLICATION_GRACE.read(env) * 1000),
  };
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
