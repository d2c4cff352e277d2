import type { ChunkTokens } from './engines/engine-adapter';
import { Json, StreamSplice } from './stream-splice';

const sampled = (ids: number[]): ChunkTokens => ({ ids, logprobs: ids.map(() => null), sampledSoFar: null, promptTokenIds: null });
const chunk = (content: string, logprobs: Json | null = null): Json => ({
  id: 'c1',
  created: 1,
  model: 'm',
  choices: [{ index: 0, delta: { content }, logprobs, finish_reason: null }],
});

describe('StreamSplice token count (what a continuation budgets from)', () => {
  const started = () => {
    const splice = new StreamSplice('chat');
    splice.beginAttempt({ id: 'e0', weightVersion: 0 }, 'prompt');
    return splice;
  };

  it('counts the ids the engine reported in a chunk, however many tokens one delta holds (no log-probs asked)', () => {
    const splice = started();
    splice.accept(chunk('Hello wor'), sampled([9707, 1879, 10]));
    splice.accept(chunk('ld'), sampled([67]));
    expect(splice.tokens).toBe(4);
    expect(splice.text).toBe('Hello world');
    expect(splice.continuationPrefix().tokenIds).toEqual([9707, 1879, 10, 67]);
  });

  it('falls back to log-prob entries, then to one a delta, where the engine reports no ids', () => {
    const splice = started();
    splice.accept(
      chunk('ab', {
        content: [
          { token: 'a', logprob: -1 },
          { token: 'b', logprob: -1 },
        ],
      }),
      sampled([]),
    );
    splice.accept(chunk('c'), sampled([]));
    expect(splice.tokens).toBe(3);
  });
});
