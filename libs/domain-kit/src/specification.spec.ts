import { assertNever, Decider } from './decider';
import { DeciderSpecification } from './specification';

// A toy decider: a counter that refuses to go below zero, to pin down the spec helper's semantics.
type Event = { type: 'Incremented' } | { type: 'Decremented' };
type Command = { type: 'Increment' } | { type: 'Decrement' };
const counter: Decider<number, Command, Event> = {
  initialState: () => 0,
  evolve: (n, e) => (e.type === 'Incremented' ? n + 1 : n - 1),
  decide: (c, n) => {
    switch (c.type) {
      case 'Increment':
        return [{ type: 'Incremented' }];
      case 'Decrement':
        if (n === 0) throw new Error('already at zero');
        return [{ type: 'Decremented' }];
      default:
        return assertNever(c, 'command');
    }
  },
};
const equal = (actual: Event[], expected: readonly Event[]) => expect(actual).toEqual(expected);
const spec = DeciderSpecification.for(counter);

describe('DeciderSpecification', () => {
  it('folds the given events before deciding', () => {
    spec
      .given([{ type: 'Incremented' }])
      .when({ type: 'Decrement' })
      .then([{ type: 'Decremented' }], equal);
  });

  it('reports a decision that differs from the expectation', () => {
    expect(() => spec.given([]).when({ type: 'Increment' }).thenNothingHappened(equal)).toThrow();
  });

  it('checks thrown errors, and fails when nothing is thrown', () => {
    spec
      .given([])
      .when({ type: 'Decrement' })
      .thenThrows((e) => (e as Error).message === 'already at zero');
    expect(() =>
      spec
        .given([])
        .when({ type: 'Increment' })
        .thenThrows(() => true),
    ).toThrow(/expected decide\(\) to throw/);
  });
});
