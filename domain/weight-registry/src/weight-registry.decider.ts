import { Decider, JSON_STATE_CODEC } from '@robustrl/domain-kit';
import { PUBLICATION_GRACE_MS, publicationRefusals } from './publication-authority';
import { abandonments, stalePulls } from './pull-failures';
import { DEFAULT_PULL_WINDOW, schedulePulls } from './pull-scheduler';
import { RelaySet } from './relay-set';
import { upgradeRegistryData } from './registry-snapshot';
import { releases } from './releases';
import { DEFAULT_RETAINED_VERSIONS, retirements } from './retention';
import { evolveWeightRegistry } from './weight-registry.evolve';
import { initialWeightRegistryState, rebuildRegistryIndex } from './registry-reindex';
import {
  RegistryData,
  RegistryFact,
  trainerCanServe,
  WeightRegistryCommand,
  WeightRegistryDraft,
  WeightRegistryEvent,
  WeightRegistryState,
} from './weight-registry.state';

export interface WeightRegistryOptions {
  /** Versions kept however old (paper: the newest weights and the one rollouts may still serve). */
  retainVersions?: number;
  /** Buckets one puller may have in flight at once (1: strictly one at a time). */
  pullWindow?: number;
  /**
   * Whether rollouts serve what they hold (paper §5.2.1 ➂). `false` is the baseline every other framework
   * uses — every rollout pulls every bucket from the trainer — kept for comparison (bench:weights).
   */
  relays?: boolean;
  /** How long a publication whose publisher the roster does not say is a trainer waits before it is refused (publication-authority.ts). */
  publicationGraceMs?: number;
}

/**
 * The weight registry of one job (paper §5.2.1 UCX-based weight update, §5.2.2 failure cases), as a
 * Decider: the shell feeds it membership, verdicts and weight events, publishes the drafts it returns
 * and folds them back before the next decision.
 *
 * decide = refuse the publications held past their grace (publication-authority.ts), then reconcile the
 * state (the observed message is in: the registry evolves in place), each step folding its drafts before
 * the next sees the state:
 *   1. RelaySet.joins     — rollouts that now hold a version whole join the relay set
 *   2. RelaySet.leaves    — relays that died, were lent, swapped version or lost a bucket leave it
 *   3. releases           — the trainer no longer has to serve a version: TrainerReleased (once)
 *   4. abandonments       — versions nobody can complete any more after a trainer fault are retired
 *   5. stalePulls         — pulls whose source or puller is gone fail (the puller continues elsewhere)
 *   6. retirements        — retention: keep the newest K, retire older ones nobody needs
 *   7. schedulePulls      — give idle pullers their next bucket from a free source
 *
 * Because the decisions are a function of the state alone, a redelivered message (whose effects are
 * already folded in) decides nothing again, and pull ids follow from the attempt counters in state.
 *
 * Each step reads the derived index (see `registry-index.ts`), so a decision costs what it
 * decides. decide may not write the state, so it cannot fold a step's drafts into it; it does not need
 * to in the common case — a pull completes and the next one is assigned, a rollout joins the relays
 * with the version it completed and leaves with the one it had: joins and leaves read nothing the other
 * changes, and when steps 3–6 decide nothing the joins changed nothing the scheduler reads (they drop
 * older copies; the scheduler assigns only the newest version). Otherwise (a release, an abandonment,
 * a failed pull, a retirement, or joins that might lead to one) decide runs the steps on a copy of the
 * state, folding as it goes — rare: a few times per published version and per fault.
 */
export function createWeightRegistryDecider(
  options: WeightRegistryOptions = {},
): Decider<WeightRegistryState, WeightRegistryCommand, WeightRegistryEvent, WeightRegistryDraft> {
  const keep = options.retainVersions ?? DEFAULT_RETAINED_VERSIONS;
  const window = options.pullWindow ?? DEFAULT_PULL_WINDOW;
  const relays = options.relays ?? true;
  const graceMs = options.publicationGraceMs ?? PUBLICATION_GRACE_MS;
  if (keep < 1 || window < 1) throw new Error('retainVersions and pullWindow must be at least 1');

  const steps: Array<(s: WeightRegistryState) => WeightRegistryDraft[]> = [
    RelaySet.joins,
    RelaySet.leaves,
    releases,
    abandonments,
    stalePulls,
    (s) => retirements(s, keep),
    (s) => schedulePulls(s, window, relays),
  ];

  /** Every step in turn on a copy of `state`, each step's drafts folded before the next. */
  function reconcileOnCopy(state: WeightRegistryState): WeightRegistryDraft[] {
    let current = copyState(state);
    const out: WeightRegistryDraft[] = [];
    for (const step of steps) {
      for (const d of step(current)) {
        out.push(d);
        current = evolveWeightRegistry(current, d as RegistryFact);
      }
    }
    return out;
  }

  function decide(command: WeightRegistryCommand, state: WeightRegistryState): WeightRegistryDraft[] {
    // Held publications past their grace (publication-authority.ts): refusing one changes nothing the steps read.
    const refused = Object.keys(state.pendingPublications).length > 0 ? publicationRefusals(state, command.now, graceMs) : [];
    return [...refused, ...reconcile(state)];
  }

  function reconcile(state: WeightRegistryState): WeightRegistryDraft[] {
    const joins = RelaySet.joins(state);
    if (
      joinsMayLeadFurther(state, joins) ||
      releases(state).length > 0 ||
      abandonments(state).length > 0 ||
      state.index.stalePulls.size > 0 ||
      retirements(state, keep).length > 0
    ) {
      return reconcileOnCopy(state);
    }
    return [...joins, ...RelaySet.leaves(state), ...schedulePulls(state, window, relays)];
  }

  return {
    initialState: initialWeightRegistryState,
    decide,
    evolve: (state, event) => evolveWeightRegistry(state, event as RegistryFact),
    evolution: 'in-place',
    snapshotCodec: {
      encode: ({ index: _derived, ...data }) => JSON_STATE_CODEC.encode(data),
      // A snapshot from before shards decodes as versions of one shard (registry-snapshot.ts).
      decode: (data) => rebuildRegistryIndex(upgradeRegistryData(JSON_STATE_CODEC.decode(data) as RegistryData)),
    },
  };
}

/**
 * Whether folding these RelayJoined could make a later step decide something (then decide folds on a
 * copy): the join may release its version (async, or every live rollout holds it), or the copies the
 * joining rollout drops (older versions) may be what keeps a version from abandonment or what a pull
 * it serves reads. Errs towards the copy: it only has to be right when it says no.
 */
function joinsMayLeadFurther(state: WeightRegistryState, joins: readonly WeightRegistryDraft[]): boolean {
  const ix = state.index;
  // Of the older versions the joining rollouts drop: how many whole copies are left.
  const left = new Map<number, number>();
  for (const j of joins) {
    if (j.type !== 'RelayJoined') continue;
    const { instanceId, version } = j.data;
    const v = state.versions[version];
    if (v && !v.trainerReleased && (state.mode === 'async' || (ix.wholeCount.get(version) ?? 0) === ix.rollouts.length)) return true;
    for (const older of ix.whole.get(instanceId) ?? []) {
      if (older >= version) continue;
      const copies = (left.get(older) ?? ix.wholeCount.get(older) ?? 0) - 1;
      left.set(older, copies);
      if (copies <= 0 && !trainerCanServe(state, state.versions[older])) return true;
    }
    for (const pullId of ix.pullsOfSourceMachine.get(instanceId) ?? []) if (state.pulls[pullId].version < version) return true;
  }
  return false;
}

/**
 * A copy of the facts with its own index, as far down as evolve writes: the records whose entries it
 * sets or deletes are copied, the entries themselves shared (machines, versions, pulls and relays are
 * replaced, never written); holdings and attempt counters, written inside, are copied whole. Cloning
 * everything copied every version the job ever published, with its trainer sources (625
 * sources a version at 10,000 GPUs), on every reconciliation: a cost growing with the job's length.
 */
function copyState(state: WeightRegistryState): WeightRegistryState {
  const { index: _derived, ...data } = state;
  return rebuildRegistryIndex({
    ...data,
    machines: { ...data.machines },
    versions: { ...data.versions },
    pulls: { ...data.pulls },
    relays: { ...data.relays },
    retiredAttempts: { ...data.retiredAttempts },
    holdings: structuredClone(data.holdings),
    attempts: structuredClone(data.attempts),
  });
}

export const WeightRegistryDecider = createWeightRegistryDecider();
