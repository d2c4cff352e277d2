import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { cyclesOf, decideReachingEvolve, fileCycles, fileGraph, packageCycles } from './import-cycles';
import { scratchTree } from './scratch-tree';

const ROOT = join(__dirname, '..', '..');

describe('import cycles', () => {
  it('no file imports itself through others (type-only imports count)', () => {
    expect(fileCycles(ROOT)).toEqual([]);
  });

  it('no workspace package imports itself through others', () => {
    expect(packageCycles(ROOT)).toEqual([]);
  });

  it('finds each cycle once, whatever node it is entered from, and ignores acyclic paths', () => {
    const graph = new Map<string, string[]>([
      ['a', ['b']],
      ['b', ['c', 'd']],
      ['c', ['a']],
      ['d', ['e']],
      ['e', []],
      ['x', ['x2']],
      ['x2', ['x']],
    ]);
    expect(cyclesOf(graph)).toEqual([
      ['a', 'b', 'c'],
      ['x', 'x2'],
    ]);
  });

  describe('flags what it is there to flag (a scratch tree)', () => {
    let root: string;
    beforeAll(() => {
      root = scratchTree('robustrl-cycles-', {
        'libs/a/package.json': '{"name":"@robustrl/a"}',
        'libs/a/src/index.ts': "export * from './state';\n",
        'libs/a/src/state.ts': "import type { Index } from './index-of-state';\nexport interface State { index: Index }\n",
        'libs/a/src/index-of-state.ts': "import type { State } from './state';\nexport type Index = (s: State) => void;\n",
        'libs/a/src/uses-b.ts': "import { b } from '@robustrl/b';\nexport const a = b;\n",
        'libs/a/src/state.spec.ts': "import './uses-b';\nimport './state.spec';\n",
        'libs/b/package.json': '{"name":"@robustrl/b"}',
        'libs/b/src/index.ts': "import { a } from '@robustrl/a/src/uses-b';\nexport const b = 1;\nvoid a;\n",
      });
    });
    afterAll(() => rmSync(root, { recursive: true, force: true }));

    it('a type-only cycle between two files, and not a spec importing itself', () => {
      expect(fileCycles(root)).toEqual([['libs/a/src/index-of-state.ts', 'libs/a/src/state.ts']]);
    });

    it('two packages importing each other', () => {
      expect(packageCycles(root)).toEqual([['@robustrl/a', '@robustrl/b']]);
    });
  });

  it("no domain's decide module reaches its evolve module, directly or through another file", () => {
    const graph = fileGraph(ROOT, ['domain']);
    expect([...graph.keys()].filter((f) => f.endsWith('.decide.ts')).length).toBeGreaterThanOrEqual(3);
    expect(decideReachingEvolve(graph)).toEqual([]);
  });

  it('flags a decide module that reaches evolve through a helper (a scratch graph)', () => {
    const graph = new Map<string, string[]>([
      ['domain/x/src/x.decide.ts', ['domain/x/src/plans.ts', 'domain/x/src/x.state.ts']],
      ['domain/x/src/plans.ts', ['domain/x/src/x.evolve.ts']],
      ['domain/x/src/x.evolve.ts', ['domain/x/src/x.state.ts']],
      ['domain/x/src/x.state.ts', []],
      ['domain/x/src/full-recompute/x.decide.ts', ['domain/x/src/x.evolve.ts']],
    ]);
    expect(decideReachingEvolve(graph)).toEqual([{ decide: 'domain/x/src/x.decide.ts', evolve: 'domain/x/src/x.evolve.ts' }]);
  });
});
