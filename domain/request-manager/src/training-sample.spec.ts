import type { StoredTurn, TokenSpan } from '@robustrl/contracts';
import { trainingSample } from './training-sample';

const at = '2026-11-26T00:00:00.000Z';

function span(over: Partial<TokenSpan> & Pick<TokenSpan, 'tokenIds'>): TokenSpan {
  return { rolloutId: 'r0', weightVersion: 3, logprobs: over.tokenIds.map((_, i) => -0.1 * (i + 1)), sampled: null, context: 'prompt', ...over };
}

function turn(turnIndex: number, kind: StoredTurn['kind'], spans: TokenSpan[] | null, tokens?: number): StoredTurn {
  const count = tokens ?? (spans ?? []).reduce((n, s) => n + s.tokenIds.length, 0);
  return { turnId: `t${turnIndex}`, turnIndex, kind, content: '…', rolloutId: 'r0', weightVersion: 3, tokens: count, spans, createdAt: at };
}

describe('trainingSample: a stored trajectory as a policy-gradient trainer takes it', () => {
  it('one model turn: the prompt ids, then the sampled ids with their log-probs, all trained on', () => {
    const result = trainingSample({
      turns: [turn(0, 'model-output', [span({ tokenIds: [7, 8, 2], promptTokenIds: [1, 2, 3] })])],
      reward: 1,
      metadata: { task: 'add' },
    });
    expect(result.reason).toBeNull();
    expect(result.sample).toEqual({
      promptTokenIds: [1, 2, 3],
      responseTokenIds: [7, 8, 2],
      logprobs: [-0.1, -0.2, -0.30000000000000004],
      lossMask: [1, 1, 1],
      versions: [3, 3, 3],
      reward: 1,
      metadata: { task: 'add' },
      exact: true,
    });
  });

  it('a failover mid-turn: spans of two engines and versions concatenate, none lost or repeated', () => {
    const result = trainingSample({
      turns: [
        turn(0, 'model-output', [
          span({ tokenIds: [7, 8], promptTokenIds: [1, 2], rolloutId: 'r0', weightVersion: 3 }),
          span({ tokenIds: [9], rolloutId: 'r1', weightVersion: 4, context: 'tokens' }),
        ]),
      ],
      reward: 0,
      metadata: null,
    });
    expect(result.sample?.responseTokenIds).toEqual([7, 8, 9]);
    expect(result.sample?.versions).toEqual([3, 3, 4]);
    expect(result.sample?.exact).toBe(true);
  });

  it("multi-turn: the tool result between model turns is the environment's (masked, no log-prob)", () => {
    const result = trainingSample({
      turns: [
        turn(0, 'tool-call', [span({ tokenIds: [10, 11], promptTokenIds: [1, 2] })]),
        turn(1, 'tool-result', null, 0),
        // The second call's prompt extends everything before it by the tool result's tokens 20, 21.
        turn(2, 'model-output', [span({ tokenIds: [30], promptTokenIds: [1, 2, 10, 11, 20, 21] })]),
      ],
      reward: 0.5,
      metadata: null,
    });
    expect(result.sample).toMatchObject({
      promptTokenIds: [1, 2],
      responseTokenIds: [10, 11, 20, 21, 30],
      lossMask: [1, 1, 0, 0, 1],
      versions: [3, 3, null, null, 3],
    });
    expect(result.sample?.logprobs.slice(2, 4)).toEqual([null, null]);
  });

  it('a continuation from re-tokenised text keeps the ids but is marked inexact', () => {
    const result = trainingSample({
      turns: [turn(0, 'model-output', [span({ tokenIds: [7], promptTokenIds: [1] }), span({ tokenIds: [8], context: 'text', rolloutId: 'r1' })])],
      reward: 1,
      metadata: null,
    });
    expect(result.sample?.responseTokenIds).toEqual([7, 8]);
    expect(result.sample?.exact).toBe(false);
  });

  it('says why when no exact sample can be built', () => {
    const cases: Array<[StoredTurn[], RegExp]> = [
      [[turn(0, 'tool-result', null, 0)], /no generated turn/],
      [[turn(0, 'model-output', [span({ tokenIds: [7] })])], /turn 0 has no prompt token ids/],
      [[turn(0, 'model-output', null, 5)], /turn 0 has no token ids/],
      [[turn(0, 'model-output', [span({ tokenIds: [7], promptTokenIds: [1], sampled: 2 })])], /sampled 2 tokens but reported 1 ids/],
      [[turn(0, 'model-output', [span({ tokenIds: [7], promptTokenIds: [1] })], 4)], /4 tokens generated but 1 ids recorded/],
      [
        [turn(0, 'model-output', [span({ tokenIds: [7], promptTokenIds: [1] })]), turn(1, 'model-output', [span({ tokenIds: [9], promptTokenIds: [1, 8] })])],
        /turn 1's prompt does not extend the tokens before it/,
      ],
    ];
    for (const [turns, reason] of cases) {
      const result = trainingSample({ turns, reward: 1, metadata: null });
      expect(result.sample).toBeNull();
      expect(result.reason).toMatch(reason);
    }
  });
});
