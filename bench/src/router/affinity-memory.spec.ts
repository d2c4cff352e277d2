import { AffinityMemory } from './affinity-memory';

describe("the fake engine's memory of the conversations it served", () => {
  const user = (text: string) => ({ role: 'user', content: text });

  it('a turn that goes on a conversation it served is a hit; one it never saw is not', () => {
    const memory = new AffinityMemory();
    memory.observe([user('hi')]);
    memory.remember([user('hi')], 'hello');
    memory.observe([user('hi'), { role: 'assistant', content: 'hello' }, user('more')]);
    memory.observe([user('other'), { role: 'assistant', content: 'x' }, user('more')]);
    expect(memory.stats()).toEqual({ requests: 3, multiTurnRequests: 2, hits: 1 });
  });

  it('is bounded: the oldest conversation goes first', () => {
    const memory = new AffinityMemory(2);
    for (const text of ['a', 'b', 'c']) memory.remember([user(text)], 'ok');
    for (const text of ['a', 'b', 'c']) memory.observe([user(text), { role: 'assistant', content: 'ok' }, user('next')]);
    expect(memory.stats().hits).toBe(2);
  });

  it('reset keeps the conversations, forget empties them (a cold engine for the next configuration)', () => {
    const memory = new AffinityMemory();
    memory.remember([user('hi')], 'hello');
    const again = [user('hi'), { role: 'assistant', content: 'hello' }, user('more')];
    memory.reset();
    memory.observe(again);
    expect(memory.stats()).toEqual({ requests: 1, multiTurnRequests: 1, hits: 1 });
    memory.forget();
    expect(memory.stats()).toEqual({ requests: 0, multiTurnRequests: 0, hits: 0 });
    memory.observe(again);
    expect(memory.stats().hits).toBe(0);
  });
});
