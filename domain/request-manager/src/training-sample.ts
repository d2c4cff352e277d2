import type { StoredTurn, TrainingSample, TrajectoryWithTurns } from '@robustrl/contracts';

/**
 * A stored trajectory as a policy-gradient trainer takes it (docs/integrators/trajectories.md "Tokens in, tokens out"), built from
 * what the router recorded and nothing else — no tokenizer, so a restarted trainer gets exactly the ids
 * the engines sampled:
 *
 *  - the prompt is the ids the engine conditioned the first model turn on (its span's `promptTokenIds`);
 *  - each model turn's sampled ids follow, with their log-probs and versions (loss mask 1);
 *  - between two model turns, the environment's tokens (tool results, the chat template's glue) are what
 *    the later turn's prompt ids hold beyond everything before it (loss mask 0) — multi-turn RL's usual
 *    masking. A later prompt that does not extend the earlier ids (the caller re-rendered the history
 *    differently) leaves no exact sequence to train on, and says so.
 *
 * Pure: a trajectory in, a sample or the reason there is none out.
 */
export type TrainingSampleResult = { sample: TrainingSample; reason: null } | { sample: null; reason: string };

const GENERATED = new Set(['model-output', 'tool-call']);

export function trainingSample(trajectory: Pick<TrajectoryWithTurns, 'turns' | 'reward' | 'metadata'>): TrainingSampleResult {
  const model = trajectory.turns.filter((t) => GENERATED.has(t.kind));
  if (model.length === 0) return fail('no generated turn');
  if (!model[0]!.spans?.length) return fail(`turn ${model[0]!.turnIndex} has no token ids (recorded as text only)`);
  const prompt = model[0]!.spans[0]!.promptTokenIds;
  if (!prompt) return fail(`turn ${model[0]!.turnIndex} has no prompt token ids (the engine reported none)`);

  const sequence: number[] = [...prompt];
  const response: number[] = [];
  const logprobs: Array<number | null> = [];
  const mask: Array<0 | 1> = [];
  const versions: Array<number | null> = [];
  let exact = true;
  for (const [k, turn] of model.entries()) {
    const sampled = sampledOf(turn);
    if (typeof sampled === 'string') return fail(sampled);
    if (k > 0) {
      const next = turn.spans?.[0]?.promptTokenIds;
      if (!next) return fail(`turn ${turn.turnIndex} has no prompt token ids (the engine reported none)`);
      if (!startsWith(next, sequence))
        return fail(`turn ${turn.turnIndex}'s prompt does not extend the tokens before it (the history was rendered again differently)`);
      for (const id of next.slice(sequence.length)) push(id, null, 0, null);
    }
    for (const [i, id] of sampled.ids.entries()) push(id, sampled.logprobs[i]!, 1, sampled.versions[i]!);
    exact &&= sampled.exact;
  }
  return {
    sample: {
      promptTokenIds: prompt,
      responseTokenIds: response,
      logprobs,
      lossMask: mask,
      versions,
      reward: trajectory.reward,
      metadata: trajectory.metadata,
      exact,
    },
    reason: null,
  };

  function push(id: number, logprob: number | null, m: 0 | 1, version: number | null): void {
    sequence.push(id);
    response.push(id);
    logprobs.push(logprob);
    mask.push(m);
    versions.push(version);
  }
}

interface Sampled {
  ids: number[];
  logprobs: Array<number | null>;
  versions: number[];
  exact: boolean;
}

/** A turn's sampled ids across its spans, or why they are not all known. */
function sampledOf(turn: StoredTurn): Sampled | string {
  const spans = turn.spans ?? [];
  if (spans.length === 0) return `turn ${turn.turnIndex} has no token ids (recorded as text only)`;
  const out: Sampled = { ids: [], logprobs: [], versions: [], exact: true };
  for (const span of spans) {
    if (span.sampled !== null && span.sampled !== span.tokenIds.length) {
      return `turn ${turn.turnIndex}: engine ${span.rolloutId} sampled ${span.sampled} tokens but reported ${span.tokenIds.length} ids`;
    }
    out.ids.push(...span.tokenIds);
    out.logprobs.push(...span.logprobs);
    out.versions.push(...span.tokenIds.map(() => span.weightVersion));
    if (span.context === 'text') out.exact = false;
  }
  if (out.ids.length !== turn.tokens) return `turn ${turn.turnIndex}: ${turn.tokens} tokens generated but ${out.ids.length} ids recorded`;
  return out;
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  if (ids.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false;
  return true;
}

function fail(reason: string): TrainingSampleResult {
  return { sample: null, reason };
}
