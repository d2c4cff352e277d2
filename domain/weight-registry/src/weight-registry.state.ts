import { DataOf, Draft, MessageOf, Role, TrainingMode } from '@robustrl/contracts';
import type { JobCommand } from '@robustrl/domain-kit';
import type { RegistryIndex } from './registry-index';

/**
 * The weight registry's view of one job (paper §5.2.1, §5.2.2): weight versions and their shards, who
 * holds which (shard, bucket) of which version, the pulls in flight and the relay set.
 *
 * Identity, kept simple on purpose: a rollout instance IS its machine (one weight-pulling agent per
 * rollout machine, instance id = machine id). Trainer sources are the ranks a shard's
 * WeightVersionPublished names; a source id `<machineId>` or `<machineId>/<rank>` lives on machine
 * `<machineId>`, and one machine may publish several shards (one per rank it runs).
 */
export const WEIGHT_REGISTRY_INPUT_TYPES = [
  'JobStarted',
  'MachineRegistered',
  'MachineDeregistered',
  'MachineRoleChanged',
  'FaultConfirmed',
  // On the control topic: the shell must subscribe to it for lends to be seen before the role change,
  // and for the trainer epoch of every group the controller forms (publication-authority.ts).
  'PromoteRolloutToTrainer',
  'RestartTrainerGroup',
  'RestartTask',
  'WeightVersionPublished',
  'WeightPullCompleted',
  'WeightPullFailed',
  // The registry's own outputs come back on the weights topic; folding them again changes nothing.
  'WeightPullAssigned',
  'RelayJoined',
  'RelayLeft',
  'WeightVersionRetired',
  'TrainerReleased',
  'WeightPublicationRefused',
] as const;
export const WEIGHT_REGISTRY_OUTPUT_TYPES = [
  'WeightPullAssigned',
  'WeightPullFailed',
  'RelayJoined',
  'RelayLeft',
  'WeightVersionRetired',
  'TrainerReleased',
  'WeightPublicationRefused',
] as const;

export type WeightRegistryInputType = (typeof WEIGHT_REGISTRY_INPUT_TYPES)[number];
export type WeightRegistryInput = MessageOf<WeightRegistryInputType>;
export type WeightRegistryEvent = MessageOf<WeightRegistryInputType | (typeof WEIGHT_REGISTRY_OUTPUT_TYPES)[number]>;
export type WeightRegistryCommand = JobCommand<WeightRegistryInput>;
/** What decide returns: an output before the host envelopes it. */
export type WeightRegistryDraft = Draft<(typeof WEIGHT_REGISTRY_OUTPUT_TYPES)[number]>;

/** What evolve needs of a message: a full message (input) or a draft the decider just produced. */
export type RegistryFact = Draft<WeightRegistryInputType> & { occurredAt?: string; eventId?: string };

/** Reasons the registry itself writes on WeightPullFailed; any other reason came from a puller's agent. */
export const PullFailureReason = {
  /** The trainer died before any living rollout held the version whole (paper §5.2.2): drop the partial copy. */
  versionAbandoned: 'source-version-abandoned',
  /** The source died, was lent, or no longer holds the bucket: continue from another source (paper §5.2.2). */
  sourceLost: 'source-lost',
  /** The puller itself stopped serving (dead, lent, deregistered). */
  pullerGone: 'puller-gone',
  /** The puller's agent process restarted since the pull was assigned to it: the new one never heard of it. */
  pullerRestarted: 'puller-restarted',
} as const;
const REGISTRY_REASONS: readonly string[] = Object.values(PullFailureReason);

/** An agent's failure reason that says the bytes arrived but did not match the manifest checksum. */
export const isCorruption = (reason: string) => /checksum|corrupt/i.test(reason);
/** An agent's failure reason that blames the source (connection refused, timeout, ...): avoid that source. */
export const blamesSource = (reason: string) => !isCorruption(reason) && !REGISTRY_REASONS.includes(reason);

export interface RegistryMachine {
  machineId: string;
  role: Role;
  status: 'alive' | 'down';
  address: string;
  /** The agent's UCX weight server; null: the machine cannot transfer weights, so it neither pulls nor serves. */
  weightsAddress: string | null;
  /** Why the machine is in its status; a relay that leaves carries it as its reason. */
  reason: string;
  /** When the status was last set (ms): an older redelivered membership event does not undo a newer one. */
  since: number;
  /** The registering agent process (absent from older agents): a new one holds no weights yet. */
  incarnation?: string;
}

/**
 * A registration that only repeats what the registry knows (an engine restarted in place announces its
 * machine again): same role, same agent process, same weight server, so its holdings stand. Any other
 * registration is a (re)join: the agent process restarted — after a task restart it may come back before
 * the detector saw it go — and a new process serves none of the old one's weights (paper §5.2.1 ➂).
 */
export function repeatsRegistration(m: RegistryMachine, d: { role: Role; weightsAddress?: string; incarnation?: string }): boolean {
  return m.status === 'alive' && m.role === d.role && m.weightsAddress === (d.weightsAddress ?? null) && m.incarnation === d.incarnation;
}

export interface WeightBucket {
  index: number;
  sizeBytes: number;
  checksum: string;
}

export interface WeightSource {
  instanceId: string;
  address: string;
}

/**
 * One publisher's part of a version (DESIGN "Weights are named and sharded"): a trainer rank lays its
 * own tensors into its own buckets and serves them. Pulls, holdings and the one-puller-per-bucket rule
 * are per (shard, bucket); a version of one shard is what every version was before shards.
 */
export interface WeightShard {
  index: number;
  /** Ordered by index: pullers fetch them in this order (paper §5.2.1 ➁, layer by layer). */
  buckets: WeightBucket[];
  /** Its publisher (a trainer rank's agent); relays are found through the holdings, not here. */
  sources: WeightSource[];
  /** False once the trainer group failed after this shard was published: its ranks no longer serve it. */
  trainerServing: boolean;
  publishedAt: number;
  publicationId: string;
  /** Its content's publicationDigest, named in every assignment of it; absent in snapshots from before. */
  digest?: string;
}

export interface WeightVersion {
  version: number;
  step: number;
  /** How many shards make the version whole (the publications' `shard.count`). */
  count: number;
  /** The shards published so far, by index: a puller may pull one as soon as it is here. */
  shards: Record<number, WeightShard>;
  /** `retired`: retention let it go, or it was abandoned after a trainer fault (paper §5.2.2). */
  status: 'live' | 'retired';
  /**
   * The trainer no longer serves it: in async mode once the first relay holds it whole (paper §5.2.1,
   * the trainer resumes), otherwise once every living rollout holds it whole (the update stage is over;
   * later pullers go to relays, paper §5.2.1 ➂). Sticky. A released trainer still serves a bucket no
   * living rollout holds (last resort, so a lost copy never stalls the version).
   */
  trainerReleased: boolean;
  /** TrainerReleased was published for it (the decider announces the release exactly once). */
  releaseAnnounced: boolean;
  /** Sources a puller's agent reported unreachable for this version; cleared by a pull they complete. */
  unreachable: string[];
}

export interface InFlightPull {
  pullId: string;
  version: number;
  /** Absent for shard 0, as on the wire (the pulls of a version of one shard read as they always did). */
  shard?: number;
  bucketIndex: number;
  pullerId: string;
  sourceId: string;
  /**
   * The puller's agent process when the pull was assigned (absent from older snapshots and agents): a
   * puller that registered again since (a restarted agent, a task restart) never carries it out — its
   * new process knows nothing of it — so the pull fails and the bucket is assigned again.
   */
  pullerIncarnation?: string;
}

export interface Relay {
  instanceId: string;
  version: number;
  address: string;
}

/** A publication held until the roster says its publishers are trainers (publication-authority.ts). */
export interface PendingPublication {
  publicationId: string;
  data: DataOf<'WeightVersionPublished'>;
  /** When it was published (its event's time): the grace counts from here. */
  at: number;
}

/** What an instance holds of one version: shard → bucket index → the pull that delivered it. */
export type ShardHoldings = Record<number, Record<number, string>>;

/** The registry's facts: what snapshots hold and what the derived index is rebuilt from. */
export interface RegistryData {
  mode: TrainingMode;
  machines: Record<string, RegistryMachine>;
  versions: Record<number, WeightVersion>;
  /** instance → version → shard → bucket index → the pull that delivered it (so a late checksum failure names it). */
  holdings: Record<string, Record<number, ShardHoldings>>;
  pulls: Record<string, InFlightPull>;
  /**
   * `version/puller` → shard → bucket index → pulls assigned so far; the next pull id is derived from it
   * (deterministic). Nested so that recording an assignment copies one puller's counters, not the job's.
   */
  attempts: Record<string, Record<number, Record<number, number>>>;
  /**
   * version → the highest attempt it reached before it was retired. A retired version's counters are
   * dropped (a long job would keep and copy them forever); a republication of the same number continues
   * above this, so pull ids are never reused.
   */
  retiredAttempts: Record<number, number>;
  /** `instance@version` → relay. */
  relays: Record<string, Relay>;
  /** Publications whose publishers the roster does not (yet) say are trainers, by event id. */
  pendingPublications: Record<string, PendingPublication>;
  /**
   * The newest trainer epoch the registry knows of (docs/contributors/recovery.md "Fencing"): from the controller's group and
   * task restarts and the publications it made live. A publication of an older epoch is refused. Absent: 0.
   */
  trainerEpoch?: number;
}

/**
 * The state a hosted registry evolves in place: its facts and `index`, what it derives from them to
 * decide on a message without scanning the job (see `registry-index.ts`). The index is left out
 * of snapshots and rebuilt from the facts.
 */
export interface WeightRegistryState extends RegistryData {
  index: RegistryIndex;
}

export const initialRegistryData = (): RegistryData => ({
  mode: 'sync',
  machines: {},
  versions: {},
  holdings: {},
  pulls: {},
  attempts: {},
  retiredAttempts: {},
  relays: {},
  pendingPublications: {},
});

export const machineOf = (instanceId: string) => instanceId.split('/')[0];
export const relayKey = (instanceId: string, version: number) => `${instanceId}@${version}`;
export const attemptKey = (version: number, pullerId: string) => `${version}/${pullerId}`;
/** A pull's shard (absent: 0, as on the wire). */
export const shardOf = (p: { shard?: number }) => p.shard ?? 0;
/** Pulls of this (version, shard, bucket, puller) assigned so far. */
export const attemptsOf = (
  state: Pick<RegistryData, 'attempts' | 'retiredAttempts'>,
  version: number,
  shard: number,
  bucketIndex: number,
  pullerId: string,
): number => Math.max(state.attempts[attemptKey(version, pullerId)]?.[shard]?.[bucketIndex] ?? 0, state.retiredAttempts[version] ?? 0);
/** The pull as the state keeps it: its shard only when not 0, as on the wire. */
export const inFlight = (d: Omit<InFlightPull, 'shard' | 'pullerIncarnation'> & { shard?: number }, pullerIncarnation?: string): InFlightPull => ({
  pullId: d.pullId,
  version: d.version,
  ...(shardOf(d) !== 0 ? { shard: shardOf(d) } : {}),
  bucketIndex: d.bucketIndex,
  pullerId: d.pullerId,
  sourceId: d.sourceId,
  ...(pullerIncarnation !== undefined ? { pullerIncarnation } : {}),
});

/** Whether the pull's puller registered as another agent process since the pull was assigned to it. */
export const pullerRestarted = (machines: Record<string, RegistryMachine>, p: InFlightPull): boolean =>
  p.pullerIncarnation !== undefined && machines[p.pullerId]?.incarnation !== p.pullerIncarnation;
/**
 * Pull ids come from state alone (their cause: version, shard, bucket, puller, attempt), so a redelivered
 * input that re-runs decide names the same pull. Shard 0 keeps the form ids had before shards.
 */
export const pullIdFor = (version: number, shard: number, bucketIndex: number, pullerId: string, attempt: number) =>
  shard === 0 ? `w${version}/b${bucketIndex}/${pullerId}#${attempt}` : `w${version}/s${shard}/b${bucketIndex}/${pullerId}#${attempt}`;

/** A live rollout that takes part in weight transfer: alive and with a weight server (see weightsAddress). */
const isWeightRollout = (m: RegistryMachine | undefined): m is RegistryMachine =>
  m !== undefined && m.role === 'rollout' && m.status === 'alive' && m.weightsAddress !== null;
export const isLiveRollout = (s: RegistryData, instanceId: string) => isWeightRollout(s.machines[instanceId]);
export const liveRollouts = (s: RegistryData) =>
  Object.values(s.machines)
    .filter(isWeightRollout)
    .map((m) => m.machineId)
    .sort();
export const isMachineDown = (s: RegistryData, instanceId: string) => s.machines[machineOf(instanceId)]?.status === 'down';

export const liveVersions = (s: RegistryData) =>
  Object.values(s.versions)
    .filter((v) => v.status === 'live')
    .map((v) => v.version)
    .sort((a, b) => a - b);
/** The version pullers go for: the newest live one. */
export const targetVersion = (s: RegistryData): number | undefined => liveVersions(s).at(-1);

/** The shards of `v` published so far, in index order (pullers walk them in this order). */
export const publishedShards = (v: WeightVersion): WeightShard[] => Object.values(v.shards).sort((a, b) => a.index - b.index);

export const holdsBucket = (s: RegistryData, instanceId: string, version: number, bucketIndex: number, shard = 0) =>
  s.holdings[instanceId]?.[version]?.[shard]?.[bucketIndex] !== undefined;
/** Every bucket of one published shard. */
export const holdsShard = (s: RegistryData, instanceId: string, version: number, shard: WeightShard) => {
  const held = s.holdings[instanceId]?.[version]?.[shard.index];
  return held !== undefined && shard.buckets.every((b) => held[b.index] !== undefined);
};
/** Whole: every bucket of every one of the version's `count` shards (a shard not yet published is missing). */
export const holdsWhole = (s: RegistryData, instanceId: string, version: number) => {
  const v = s.versions[version];
  if (v === undefined || v.status !== 'live') return false;
  for (let shard = 0; shard < v.count; shard++) if (!v.shards[shard] || !holdsShard(s, instanceId, version, v.shards[shard])) return false;
  return true;
};
/** The newest live version an instance holds whole: what it serves inference with, and relays. */
export const newestWhole = (s: RegistryData, instanceId: string): number | undefined =>
  liveVersions(s)
    .filter((v) => holdsWhole(s, instanceId, v))
    .at(-1);

/** Whether `instanceId` publishes `v` (one of its shards, or the given one). */
export const isTrainerSource = (v: WeightVersion, instanceId: string, shard?: number) =>
  (shard === undefined ? publishedShards(v) : v.shards[shard] ? [v.shards[shard]] : []).some((sh) => sh.sources.some((x) => x.instanceId === instanceId));
/** Whether a shard's own trainer ranks are still there to serve it (released or not). */
export const shardServed = (s: RegistryData, shard: WeightShard) => shard.trainerServing && shard.sources.some((src) => !isMachineDown(s, src.instanceId));
/**
 * Whether the version's own trainer ranks can still complete it: every published shard still served
 * (a shard not yet published is still to come; a trainer fault stops every rank, paper §5.1.2).
 */
export const trainerCanServe = (s: RegistryData, v: WeightVersion) => publishedShards(v).every((shard) => shardServed(s, shard));

/**
 * Async mode (paper §5.2.1): the trainer resumes training as soon as the first relay holds the version
 * whole; otherwise once every living rollout does. The version's RelayJoined flips the flag in evolve;
 * the decider then announces it with TrainerReleased (see releases.ts).
 */
export const trainerReleased = (s: RegistryData, version: number) => s.versions[version]?.trainerReleased ?? false;
