import type { TokenSpan } from '@robustrl/contracts';
import { splitTokenPrompt } from './token-prompt';
import { PrefixTurn } from './trajectory-recorder';
import { planTurns } from './turn-plan';

const span = (tokenIds: number[]): TokenSpan => ({
  rolloutId: 'e1',
  weightVersion: 2,
  tokenIds,
  logprobs: tokenIds.map(() => -1),
  sampled: tokenIds.length,
  context: 'prompt',
});
const model = (turnIndex: number, ids: number[], text = 'text'): PrefixTurn => ({
  turnIndex,
  kind: 'model-output',
  content: text,
  weightVersion: 2,
  spans: [span(ids)],
});
const input = (turnIndex: number, ids: number[]): PrefixTurn => ({ turnIndex, kind: 'tool-result', content: { tokenIds: ids }, weightVersion: 2 });

describe('splitTokenPrompt: a token-id prompt split along the stored turns (tokens in, tokens out)', () => {
  it('the first request is the prompt; a later one is prompt, stored turns, then the new input', () => {
    expect(splitTokenPrompt([1, 2, 3], [], undefined)).toEqual({ base: [1, 2, 3], turns: [] });
    const stored = [model(0, [7, 8])];
    const split = splitTokenPrompt([1, 2, 3, 7, 8, 20, 21], stored, [1, 2, 3]);
    expect(split).toEqual({
      base: [1, 2, 3],
      turns: [
        { kind: 'model-output', content: 'text' },
        { kind: 'tool-result', content: { tokenIds: [20, 21] } },
      ],
    });
    // Planned against the store: the input is appended, the answer becomes turn 2.
    if ('conflict' in split) throw new Error(split.conflict);
    expect(planTurns(split.turns, stored)).toEqual({
      kind: 'generate',
      append: [{ kind: 'tool-result', content: { tokenIds: [20, 21] }, turnIndex: 1 }],
      outputIndex: 2,
    });
  });

  it('finds the prompt without the remembered base (another router instance) from where the stored turns sit', () => {
    const stored = [model(0, [7, 8]), input(1, [20]), model(2, [9])];
    expect(splitTokenPrompt([1, 2, 7, 8, 20, 9, 30], stored, undefined)).toEqual({
      base: [1, 2],
      turns: [
        { kind: 'model-output', content: 'text' },
        { kind: 'tool-result', content: { tokenIds: [20] } },
        { kind: 'model-output', content: 'text' },
        { kind: 'tool-result', content: { tokenIds: [30] } },
      ],
    });
  });

  it('a retry of the last request is a replay; an edited history is a conflict', () => {
    const stored = [model(0, [7, 8])];
    const retry = splitTokenPrompt([1, 2, 3], stored, [1, 2, 3]);
    if ('conflict' in retry) throw new Error(retry.conflict);
    expect(planTurns(retry.turns, stored)).toEqual({ kind: 'replay', turn: stored[0] });
    expect(splitTokenPrompt([1, 2, 4, 7, 8], stored, [1, 2, 3])).toEqual({ conflict: "the prompt does not start with the trajectory's prompt" });
    expect(
      splitTokenPrompt(
        [1, 2, 3, 5],
        [model(0, [])].map((t) => ({ ...t, spans: null })),
        [1, 2, 3],
      ),
    ).toEqual({
      conflict: 'stored turn 0 has no token ids to match a token prompt against',
    });
  });
});
