import { join } from 'node:path';
import { brokenPaths, citingFiles, existsOrMade, issueCitations } from './doc-paths';

const ROOT = join(__dirname, '..', '..');

describe('what the docs and comments cite can be followed', () => {
  it('every backticked repository path names a file or folder of the repository', () => {
    expect(brokenPaths(citingFiles(ROOT), existsOrMade(ROOT))).toEqual([]);
  });

  it('flags a path that names nothing, with where it is cited (a scratch file)', () => {
    const files = [
      {
        path: 'docs/guide.md',
        text: 'Read `docs/guide.md` and `libs/bus/src/message-bus.ts:12`.\nThe rule lives in `domain/detector/src/rules/gone.rule.ts`.\n',
      },
      { path: 'native/ucx/README.md', text: 'Run `test/ucx.test.mjs`; not `<job>/x` nor `libs/*/src`.\n' },
    ];
    const present = new Set(['docs/guide.md', 'libs/bus/src/message-bus.ts', 'native/ucx/test/ucx.test.mjs']);
    expect(brokenPaths(files, (p) => present.has(p))).toEqual([{ file: 'docs/guide.md', line: 2, path: 'domain/detector/src/rules/gone.rule.ts' }]);
  });

  it('no code comment or test name cites an issue number', () => {
    expect(issueCitations(citingFiles(ROOT))).toEqual([]);
  });

  it('flags an issue number in code, not in Markdown', () => {
    const files = [
      { path: 'libs/x/src/a.ts', text: '/** Restarts in place (issue 14). */\nexport const a = 1; // see vllm#123\n' },
      { path: 'docs/benchmarks.md', text: 'Issue 13: the goal was 3 s.\n' },
    ];
    expect(issueCitations(files)).toEqual([{ file: 'libs/x/src/a.ts', line: 1, text: '/** Restarts in place (issue 14). */' }]);
  });
});
