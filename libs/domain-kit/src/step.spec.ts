import { Decider } from './decider';
import { DeciderRun } from './decider-run';
import { JobCommand, observe, tick } from './job-command';
import { DeciderSpecification } from './specification';
import { foldInput, settle, step } from './step';

// A toy job decider that records what it saw: it decides on the state *before* the input, echoes each
// input as an output, and on a tick emits one `Ticked` per input seen so far.
type Event = { type: 'Input' | 'Echo' | 'Ticked'; n: number; at?: number };
type State = { folded: string[] };
const recorder: Decider<State, JobCommand<Event>, Event, { type: 'Echo' | 'Ticked'; n: number }> = {
  initialState: () => ({ folded: [] }),
  evolve: (s, e) => ({ folded: [...s.folded, `${e.type}${e.n}${e.at === undefined ? '' : `@${e.at}`}`] }),
  decide: (c, s) =>
    c.kind === 'observe'
      ? [{ type: 'Echo', n: c.message.n * 10 + s.folded.length }]
      : s.folded.filter((f) => f.startsWith('Input')).map((_, i) => ({ type: 'Ticked' as const, n: i })),
};

describe('step: the one host loop', () => {
  it('decides on the state before the input, then folds the input and the enveloped outputs in order', () => {
    const r = step(recorder, { folded: ['Input0'] }, observe({ type: 'Input', n: 7 }, 100), (o, i) => ({ ...o, at: 100 + i }));
    // decide saw one folded event (7 * 10 + 1); the input is folded before the outputs.
    expect(r.outputs).toEqual([{ type: 'Echo', n: 71 }]);
    expect(r.events).toEqual([{ type: 'Echo', n: 71, at: 100 }]);
    expect(r.state.folded).toEqual(['Input0', 'Input7', 'Echo71@100']);
  });

  it('a tick folds no input, only its outputs', () => {
    const r = step(recorder, { folded: ['Input0', 'Input1'] }, tick(5), (o) => ({ ...o, at: 5 }));
    expect(r.state.folded).toEqual(['Input0', 'Input1', 'Ticked0@5', 'Ticked1@5']);
  });

  it('does not touch the state it was given (the host adopts the result only after committing)', () => {
    const before = { folded: ['Input0'] };
    step(recorder, before, observe({ type: 'Input', n: 1 }, 1), (o) => o);
    expect(before).toEqual({ folded: ['Input0'] });
  });
});

describe('DeciderRun: multi-step scenarios through step', () => {
  it('folds the history, then keeps every output with the time it was decided at', () => {
    const run = DeciderRun.for(recorder, (o, now) => ({ ...o, at: now })).given([{ type: 'Input', n: 0 }]);
    run.observe({ type: 'Input', n: 2 }, 10);
    run.tick(20);
    expect(run.emitted.map((e) => [e.now, e.output.type, e.output.n])).toEqual([
      [10, 'Echo', 21],
      [20, 'Ticked', 0],
      [20, 'Ticked', 1],
    ]);
    expect(run.state.folded).toEqual(['Input0', 'Input2', 'Echo21@10', 'Ticked0@20', 'Ticked1@20']);
  });
});

// The same recorder, evolving in place: the host owns the state, and decide sees the input folded in.
const inPlaceRecorder: Decider<State, JobCommand<Event>, Event, { type: 'Echo' | 'Ticked'; n: number }> = {
  ...recorder,
  evolution: 'in-place',
  evolve: (s, e) => {
    s.folded.push(`${e.type}${e.n}${e.at === undefined ? '' : `@${e.at}`}`);
    return s;
  },
};

describe('step: an in-place decider', () => {
  it('folds the input first, decides on the state with it in, then folds the outputs into the same state', () => {
    const state = { folded: ['Input0'] };
    const r = step(inPlaceRecorder, state, observe({ type: 'Input', n: 7 }, 100), (o, i) => ({ ...o, at: 100 + i }));
    // decide saw two folded events (7 * 10 + 2): the input was in.
    expect(r.outputs).toEqual([{ type: 'Echo', n: 72 }]);
    expect(r.state.folded).toEqual(['Input0', 'Input7', 'Echo72@100']);
    expect(r.state).toBe(state);
  });

  it('a tick folds no input, only its outputs', () => {
    const r = step(inPlaceRecorder, { folded: ['Input0', 'Input1'] }, tick(5), (o) => ({ ...o, at: 5 }));
    expect(r.state.folded).toEqual(['Input0', 'Input1', 'Ticked0@5', 'Ticked1@5']);
  });

  it('foldInput + decide + settle is step, for a host that sees the decision before enveloping it', () => {
    const command = observe<Event>({ type: 'Input', n: 3 }, 9);
    const seen = foldInput(inPlaceRecorder, { folded: [] }, command);
    const r = settle(inPlaceRecorder, seen, command, inPlaceRecorder.decide(command, seen), (o) => o);
    expect(r.state.folded).toEqual(['Input3', 'Echo31']);
    // For a pure decider foldInput changes nothing and settle folds the input.
    const pureSeen = foldInput(recorder, { folded: [] }, command);
    expect(pureSeen.folded).toEqual([]);
    expect(settle(recorder, pureSeen, command, recorder.decide(command, pureSeen), (o) => o).state.folded).toEqual(['Input3', 'Echo30']);
  });

  it('DeciderRun and DeciderSpecification decide as step does', () => {
    const run = DeciderRun.for(inPlaceRecorder, (o, now) => ({ ...o, at: now })).given([{ type: 'Input', n: 0 }]);
    run.observe({ type: 'Input', n: 2 }, 10);
    run.tick(20);
    expect(run.emitted.map((e) => [e.now, e.output.type, e.output.n])).toEqual([
      [10, 'Echo', 22],
      [20, 'Ticked', 0],
      [20, 'Ticked', 1],
    ]);
    DeciderSpecification.for(inPlaceRecorder)
      .given([{ type: 'Input', n: 0 }])
      .when(observe({ type: 'Input', n: 5 }, 1))
      .then([{ type: 'Echo', n: 52 }], (a, e) => expect(a).toEqual(e));
    DeciderSpecification.for(recorder)
      .given([{ type: 'Input', n: 0 }])
      .when(observe({ type: 'Input', n: 5 }, 1))
      .then([{ type: 'Echo', n: 51 }], (a, e) => expect(a).toEqual(e));
  });
});
