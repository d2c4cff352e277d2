import { JSON_STATE_CODEC } from './state-codec';

describe('the default snapshot codec', () => {
  it('round-trips plain data, Maps and Sets through JSON text', () => {
    const state = {
      settings: { windowMs: 60_000, enabled: true, name: 'x' },
      machines: new Map([['m1', { lastActivityAt: 12.5, phases: new Set(['rollout', 'training']) }]]),
      list: [1, null, { nested: new Map([[3, 'three']]) }],
    };
    const text = JSON.stringify(JSON_STATE_CODEC.encode(state));
    expect(JSON_STATE_CODEC.decode(JSON.parse(text))).toEqual(state);
  });

  it('refuses what would not survive a restart, naming where it is', () => {
    class Index {}
    expect(() => JSON_STATE_CODEC.encode({ a: { b: new Index() } })).toThrow('state at $.a.b is a Index');
    expect(() => JSON_STATE_CODEC.encode({ t: Infinity })).toThrow('state at $.t is Infinity');
  });
});
