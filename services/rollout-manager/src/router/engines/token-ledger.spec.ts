import { ChunkTokens, TokenLedger } from '.';

const chunk = (ids: number[], sampledSoFar: number | null = null, logprobs = ids.map(() => -1)): ChunkTokens => ({
  ids,
  logprobs,
  sampledSoFar,
  promptTokenIds: null,
});
const e1 = { id: 'e1', weightVersion: 3 };
const e2 = { id: 'e2', weightVersion: 4 };

describe('TokenLedger: what each engine sampled of one answer, span by span', () => {
  it('one span per contributing attempt, ids concatenated in order, the continuation marked by its context', () => {
    const ledger = new TokenLedger();
    ledger.begin(e1, 'prompt');
    ledger.add(chunk([10], 1), 1);
    ledger.add(chunk([11], 2), 1);
    ledger.begin(e2, 'tokens');
    ledger.add(chunk([12, 13], 2), 2);
    expect(ledger.tokenIds).toEqual([10, 11, 12, 13]);
    expect(ledger.record()).toEqual([
      { rolloutId: 'e1', weightVersion: 3, tokenIds: [10, 11], logprobs: [-1, -1], sampled: 2, context: 'prompt' },
      { rolloutId: 'e2', weightVersion: 4, tokenIds: [12, 13], logprobs: [-1, -1], sampled: 2, context: 'tokens' },
    ]);
  });

  it("the first span carries the prompt's ids as the first engine reported them (tokens in, tokens out)", () => {
    const ledger = new TokenLedger();
    ledger.begin(e1, 'prompt');
    ledger.add({ ...chunk([10], 1), promptTokenIds: [1, 2, 3] }, 1);
    ledger.begin(e2, 'tokens');
    // A continuation's engine reports the longer token prompt it was given: the turn's prompt stays the first.
    ledger.add({ ...chunk([11], 1), promptTokenIds: [1, 2, 3, 10] }, 1);
    const [first, second] = ledger.record();
    expect(first!.promptTokenIds).toEqual([1, 2, 3]);
    expect(second!.promptTokenIds).toBeUndefined();
  });

  it("the engine's own weight versions cut a span where the version changed (an in-place load mid-answer)", () => {
    const ledger = new TokenLedger();
    ledger.begin(e1, 'prompt');
    ledger.add({ ...chunk([10, 11], 2), promptTokenIds: [1, 2] }, 2);
    ledger.add(
      {
        ...chunk([12], 3),
        versions: [
          { version: 7, start: 0, end: 2 },
          { version: 8, start: 2, end: 3 },
        ],
      },
      1,
    );
    expect(ledger.versions()).toEqual([
      { version: 7, start: 0, end: 2 },
      { version: 8, start: 2, end: 3 },
    ]);
    expect(ledger.record()).toEqual([
      { rolloutId: 'e1', weightVersion: 7, tokenIds: [10, 11], logprobs: [-1, -1], sampled: 2, context: 'prompt', promptTokenIds: [1, 2] },
      { rolloutId: 'e1', weightVersion: 8, tokenIds: [12], logprobs: [-1], sampled: 1, context: 'tokens' },
    ]);
    // Versions that do not cover exactly the span's ids are not trusted: the router's view stands.
    const odd = new TokenLedger();
    odd.begin(e1, 'prompt');
    odd.add({ ...chunk([10, 11], 2), versions: [{ version: 9, start: 0, end: 1 }] }, 2);
    expect(odd.record().map((r) => [r.weightVersion, r.tokenIds])).toEqual([[3, [10, 11]]]);
  });

  it('an attempt that forwarded nothing leaves no span (an engine that died before its first token)', () => {
    const ledger = new TokenLedger();
    ledger.begin(e1, 'prompt');
    ledger.begin(e2, 'prompt');
    ledger.add(chunk([7]), 1);
    expect(ledger.record().map((s) => s.rolloutId)).toEqual(['e2']);
  });

  it("an id the engine's stream left out (its count runs ahead) makes the ids incomplete: no token-prompt continuation", () => {
    const ledger = new TokenLedger();
    ledger.begin(e1, 'prompt');
    ledger.add(chunk([10], 1), 1);
    // llama.cpp: two tokens make one multi-byte character; the chunk carries the last id only.
    ledger.add(chunk([12], 3), 1);
    expect(ledger.tokenIds).toBeNull();
    expect(ledger.record()[0]).toMatchObject({ tokenIds: [10, 12], sampled: 3 });
  });

  it('an engine that reports no ids gives spans without ids (engine, count and context still recorded)', () => {
    const ledger = new TokenLedger();
    ledger.begin(e1, 'prompt');
    ledger.add(chunk([]), 1);
    ledger.add(chunk([], 5), 1);
    ledger.begin(e2, 'text');
    ledger.add(chunk([]), 1);
    ledger.prefilled(40);
    expect(ledger.tokenIds).toBeNull();
    expect(ledger.record()).toEqual([
      { rolloutId: 'e1', weightVersion: 3, tokenIds: [], logprobs: [], sampled: 5, context: 'prompt' },
      { rolloutId: 'e2', weightVersion: 4, tokenIds: [], logprobs: [], sampled: null, context: 'text', prefillTokens: 40 },
    ]);
  });

  it('the ids of a half tool call die with its engine; a finished call is part of the answer', () => {
    const ledger = new TokenLedger();
    ledger.begin(e1, 'prompt');
    ledger.add(chunk([1, 2]), 2);
    ledger.add(chunk([3, 4]), 2, true);
    ledger.begin(e2, 'tokens');
    expect(ledger.tokenIds).toEqual([1, 2]);
    ledger.add(chunk([5, 6]), 2, true);
    ledger.releaseHeld();
    expect(ledger.tokenIds).toEqual([1, 2, 5, 6]);
  });
});
