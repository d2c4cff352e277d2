import { prng as rng } from '@robustrl/testing/seeded-random';
import { NewTrajectory, TurnInput } from './trajectory-api';
import { isStorableStart, isStorableTurn } from './trajectory-input-checks';

/** Values that break one schema rule or another, and some that are odd yet allowed. */
const ODD: unknown[] = [
  undefined,
  null,
  '',
  'x'.repeat(500),
  'x'.repeat(501),
  'a\u0000b',
  -1,
  -0,
  0,
  1.5,
  2_147_483_647,
  2_147_483_648,
  NaN,
  Infinity,
  -Infinity,
  true,
  [],
  {},
  [1, 2],
  ['1'],
  [null],
  [-1],
  [1.5],
  'prompt',
  'tokens',
  'model-output',
  'bogus',
  { nested: 1 },
];

function spanOf(r: () => number): Record<string, unknown> {
  const n = Math.floor(r() * 20);
  const span: Record<string, unknown> = {
    rolloutId: `e${Math.floor(r() * 4)}`,
    weightVersion: Math.floor(r() * 10),
    tokenIds: Array.from({ length: n }, () => Math.floor(r() * 50_000)),
    logprobs: Array.from({ length: n }, () => (r() < 0.1 ? null : -r() * 5)),
    sampled: r() < 0.5 ? null : n,
    context: ['prompt', 'tokens', 'text'][Math.floor(r() * 3)],
  };
  if (r() < 0.3) span.prefillTokens = Math.floor(r() * 100);
  if (r() < 0.5) span.promptTokenIds = Array.from({ length: Math.floor(r() * 300) }, () => Math.floor(r() * 50_000));
  return span;
}

function turnOf(r: () => number): Record<string, unknown> {
  const turn: Record<string, unknown> = {
    trajectoryId: `t-${Math.floor(r() * 1e6)}`,
    turnId: `t/${Math.floor(r() * 1e6)}`,
    turnIndex: Math.floor(r() * 8),
    kind: ['model-output', 'tool-call', 'tool-result'][Math.floor(r() * 3)],
    content: r() < 0.5 ? { role: 'assistant', content: 'x' } : 'text',
    rolloutId: r() < 0.3 ? null : 'e1',
    weightVersion: Math.floor(r() * 10),
    tokens: Math.floor(r() * 100),
  };
  if (r() < 0.5) turn.attempt = Math.floor(r() * 3);
  if (r() < 0.6) turn.spans = Array.from({ length: 1 + Math.floor(r() * 3) }, () => spanOf(r));
  return turn;
}

function startOf(r: () => number): Record<string, unknown> {
  const start: Record<string, unknown> = {
    trajectoryId: `t-${Math.floor(r() * 1e6)}`,
    jobId: 'job',
    batchId: `b${Math.floor(r() * 10)}`,
    step: Math.floor(r() * 100),
    promptId: `p${Math.floor(r() * 100)}`,
    sampleIndex: Math.floor(r() * 16),
    prompt: [{ role: 'user', content: 'q' }],
  };
  if (r() < 0.3) start.ownerRolloutId = r() < 0.5 ? null : 'e2';
  return start;
}

/** One field (of the value or of one of its spans) set to an odd value, removed, or one added. */
function mutate(value: Record<string, unknown>, r: () => number): void {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
  const odd = () => structuredClone(pick(ODD));
  const spans = Array.isArray(value.spans)
    ? value.spans.filter((s): s is Record<string, unknown> => typeof s === 'object' && s !== null && !Array.isArray(s))
    : [];
  const target = spans.length > 0 && r() < 0.5 ? pick(spans) : value;
  const key = r() < 0.1 ? 'extra' : pick(Object.keys(target));
  const how = r();
  if (how < 0.15) delete target[key];
  else if (how < 0.25 && Array.isArray(target[key])) (target[key] as unknown[]).push(odd());
  else target[key] = odd();
}

describe('the store contract checked without zod', () => {
  it('accepts nothing the schema refuses, for turns and starts valid and broken (5,000 each, seeded)', () => {
    const r = rng(20261129);
    let refused = 0;
    for (const [generate, fast, schema] of [
      [turnOf, isStorableTurn, TurnInput],
      [startOf, isStorableStart, NewTrajectory],
    ] as const) {
      for (let i = 0; i < 5_000; i++) {
        const value = generate(r);
        const mutations = Math.floor(r() * 3);
        for (let m = 0; m < mutations; m++) mutate(value, r);
        const accepted = schema.safeParse(value).success;
        if (!accepted) refused += 1;
        if (fast(value) && !accepted) throw new Error(`accepted what the schema refuses: ${JSON.stringify(value)}`);
      }
    }
    // The generator does break the rules: thousands of the values are refused.
    expect(refused).toBeGreaterThan(2_000);
  });

  it('accepts every value generated whole, so the router skips the schema on its common path', () => {
    const r = rng(7);
    for (let i = 0; i < 2_000; i++) {
      const turn = turnOf(r);
      expect(TurnInput.safeParse(turn).success).toBe(true);
      expect(isStorableTurn(turn)).toBe(true);
      const start = startOf(r);
      expect(NewTrajectory.safeParse(start).success).toBe(true);
      expect(isStorableStart(start)).toBe(true);
    }
  });

  it('refuses what each rule names: NUL in an id, a count past INTEGER, log-probs that do not match the ids', () => {
    const turn = (over: Record<string, unknown>) => ({ ...turnOf(rng(1)), spans: undefined, ...over });
    expect(isStorableTurn(turn({}))).toBe(true);
    expect(isStorableTurn(turn({ turnId: 'a\u0000b' }))).toBe(false);
    expect(isStorableTurn(turn({ tokens: 2_147_483_648 }))).toBe(false);
    expect(isStorableTurn(turn({ content: undefined }))).toBe(false);
    const span = { rolloutId: 'e1', weightVersion: 0, tokenIds: [1, 2], logprobs: [-1], sampled: null, context: 'prompt' };
    expect(isStorableTurn(turn({ spans: [span] }))).toBe(false);
    expect(isStorableTurn(turn({ spans: [{ ...span, logprobs: [-1, null] }] }))).toBe(true);
  });
});
