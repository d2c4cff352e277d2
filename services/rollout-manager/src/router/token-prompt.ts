import { isIdList } from './engines/engine-adapter';
import { PrefixTurn } from './trajectory-recorder';
import { isOutputKind, TurnDraft } from './turn-plan';

/**
 * Completions with a token-id prompt (tokens in, tokens out; docs/integrators/trajectories.md "Tokens in, tokens out"): the same
 * split as `splitCompletionPrompt`, on ids instead of text. The trajectory's prompt is the first
 * request's ids; a later request's ids are that prompt, then each stored turn's ids in order — a model
 * turn's are what its engines sampled (its spans), an input's are what the agent appended — then the new
 * inputs, stored as `{ tokenIds }`.
 */
export function splitTokenPrompt(
  prompt: readonly number[],
  stored: readonly PrefixTurn[],
  base: readonly number[] | undefined,
): { base: number[]; turns: TurnDraft[] } | { conflict: string } {
  const segments: number[][] = [];
  for (const turn of stored) {
    const ids = idsOf(turn);
    if (ids === null) return { conflict: `stored turn ${turn.turnIndex} has no token ids to match a token prompt against` };
    segments.push(ids);
  }
  if (base === undefined) {
    if (stored.length === 0) base = [...prompt];
    else {
      const all = segments.flat();
      const at = lastIndexOf(prompt, all);
      if (at < 0) return { conflict: 'the prompt does not contain the stored turns' };
      base = prompt.slice(0, at);
    }
  }
  if (!startsWith(prompt, base, 0)) return { conflict: "the prompt does not start with the trajectory's prompt" };
  let at = base.length;
  const turns: TurnDraft[] = [];
  for (let i = 0; i < stored.length && at < prompt.length; i++) {
    if (!startsWith(prompt, segments[i]!, at)) break;
    turns.push({ kind: stored[i]!.kind, content: stored[i]!.content });
    at += segments[i]!.length;
  }
  if (at < prompt.length) turns.push({ kind: 'tool-result', content: { tokenIds: prompt.slice(at) } });
  return { base: [...base], turns };
}

/** A stored turn's ids: a model turn's from its spans, an input's from its `{ tokenIds }` content. */
function idsOf(turn: PrefixTurn): number[] | null {
  if (isOutputKind(turn.kind)) {
    const spans = turn.spans ?? [];
    if (spans.length === 0 || spans.some((s) => s.sampled !== null && s.sampled !== s.tokenIds.length)) return null;
    return spans.flatMap((s) => s.tokenIds);
  }
  const content = turn.content as { tokenIds?: unknown } | null;
  return content && isIdList(content.tokenIds) ? content.tokenIds : null;
}

function startsWith(ids: readonly number[], part: readonly number[], at: number): boolean {
  if (at + part.length > ids.length) return false;
  for (let i = 0; i < part.length; i++) if (ids[at + i] !== part[i]) return false;
  return true;
}

function lastIndexOf(ids: readonly number[], part: readonly number[]): number {
  if (part.length === 0) return -1;
  for (let at = ids.length - part.length; at >= 0; at--) if (startsWith(ids, part, at)) return at;
  return -1;
}
