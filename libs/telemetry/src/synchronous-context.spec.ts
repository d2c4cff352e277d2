import { createContextKey, ROOT_CONTEXT } from '@opentelemetry/api';
import { SynchronousContextManager } from './synchronous-context';

const key = createContextKey('spec');
const named = (name: string) => ROOT_CONTEXT.setValue(key, name);
const nameOf = (m: SynchronousContextManager) => m.active().getValue(key);

describe('SynchronousContextManager', () => {
  it('makes a context active while the function runs, nested, and restores the one before', () => {
    const m = new SynchronousContextManager();
    const seen: unknown[] = [];
    const result = m.with(named('outer'), () => {
      seen.push(nameOf(m));
      m.with(named('inner'), () => seen.push(nameOf(m)));
      seen.push(nameOf(m));
      return 42;
    });
    expect(result).toBe(42);
    expect(seen).toEqual(['outer', 'inner', 'outer']);
    expect(m.active()).toBe(ROOT_CONTEXT);
  });

  it('restores the context before when the function throws', () => {
    const m = new SynchronousContextManager();
    expect(() =>
      m.with(named('failing'), () => {
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(m.active()).toBe(ROOT_CONTEXT);
  });

  it('after an await, code sees the root context, never a context another call made active', async () => {
    const m = new SynchronousContextManager();
    const afterAwait: unknown[] = [];
    const run = (name: string) =>
      m.with(named(name), async () => {
        const before = nameOf(m);
        await new Promise((resolve) => setImmediate(resolve));
        afterAwait.push([before, nameOf(m)]);
      });
    await Promise.all([run('a'), run('b')]);
    expect(afterAwait).toEqual([
      ['a', undefined],
      ['b', undefined],
    ]);
  });

  it('binds a function to a context, with its this and arguments', () => {
    const m = new SynchronousContextManager();
    const target = {
      factor: 3,
      times(this: { factor: number }, n: number) {
        return [this.factor * n, nameOf(m)];
      },
    };
    const bound = m.bind(named('bound'), target.times);
    expect(bound.call(target, 2)).toEqual([6, 'bound']);
    expect(m.bind(named('x'), 'not a function')).toBe('not a function');
  });

  it('disable forgets the active context', () => {
    const m = new SynchronousContextManager();
    m.with(named('open'), () => {
      m.disable();
      expect(m.active()).toBe(ROOT_CONTEXT);
    });
  });
});
