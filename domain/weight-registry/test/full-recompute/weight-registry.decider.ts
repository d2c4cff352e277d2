/**
 * The registry as it was before the index, as a decider: the reference the indexed registry is held to
 * (`weight-registry-index.spec.ts`), spec code only (see weight-registry.state.ts). Its options, defaults
 * and publication refusals are the live registry's.
 */
import { Decider } from '@robustrl/domain-kit';
import { PUBLICATION_GRACE_MS, publicationRefusals } from '../../src/publication-authority';
import { DEFAULT_PULL_WINDOW } from '../../src/pull-scheduler';
import { DEFAULT_RETAINED_VERSIONS } from '../../src/retention';
import type { WeightRegistryOptions } from '../../src/weight-registry.decider';
import { abandonments, stalePulls } from './pull-failures';
import { schedulePulls } from './pull-scheduler';
import { RelaySet } from './relay-set';
import { releases } from './releases';
import { retirements } from './retention';
import { evolveWeightRegistry } from './weight-registry.evolve';
import {
  initialWeightRegistryState,
  RegistryFact,
  WeightRegistryCommand,
  WeightRegistryDraft,
  WeightRegistryEvent,
  WeightRegistryState,
} from './weight-registry.state';

/**
 * The weight registry of one job (paper §5.2.1 UCX-based weight update, §5.2.2 failure cases), as a
 * Decider: the shell feeds it membership, verdicts and weight events, publishes the drafts it returns
 * and folds them back before the next decision.
 *
 * decide = fold the observed message, then reconcile the state, each step folding its drafts before the
 * next sees the state:
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

  function decide(command: WeightRegistryCommand, state: WeightRegistryState): WeightRegistryDraft[] {
    let current = command.kind === 'observe' ? evolveWeightRegistry(state, command.message as RegistryFact) : state;
    const out: WeightRegistryDraft[] = [];
    for (const d of publicationRefusals(current, command.now, graceMs)) {
      out.push(d);
      current = evolveWeightRegistry(current, d as RegistryFact);
    }
    for (const step of steps) {
      for (const d of step(current)) {
        out.push(d);
        current = evolveWeightRegistry(current, d as RegistryFact);
      }
    }
    return out;
  }

  return {
    initialState: initialWeightRegistryState,
    decide,
    evolve: (state, event) => evolveWeightRegistry(state, event as RegistryFact),
  };
}

export const WeightRegistryDecider = createWeightRegistryDecider();
