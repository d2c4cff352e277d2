import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { brokenLinks, brokenPaths, citingFiles, docsNotLinkedFrom, existsOrMade, issueCitations } from './doc-paths';

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

  it('every relative Markdown link leads to a file of the repository', () => {
    expect(brokenLinks(citingFiles(ROOT), existsOrMade(ROOT))).toEqual([]);
  });

  it('every document under docs/ is one link from the README', () => {
    const docs = citingFiles(ROOT).map((f) => f.path);
    expect(docs.filter((d) => d.startsWith('docs/')).length).toBeGreaterThan(10);
    expect(docsNotLinkedFrom(readFileSync(join(ROOT, 'README.md'), 'utf8'), docs)).toEqual([]);
  });

  it('flags a link to nothing and a document the README does not link (scratch files)', () => {
    const files = [
      { path: 'docs/operators/deploy.md', text: 'See [security](security.md), [the top](../../README.md#x), [web](https://x.org) and [gone](../gone.md).\n' },
    ];
    const present = new Set(['docs/operators/security.md', 'README.md']);
    expect(brokenLinks(files, (p) => present.has(p))).toEqual([{ file: 'docs/operators/deploy.md', line: 1, path: '../gone.md' }]);
    const readme = '[Deploy](docs/operators/deploy.md) and [router](./docs/router.md#the-lean-path)';
    expect(docsNotLinkedFrom(readme, ['docs/operators/deploy.md', 'docs/router.md', 'docs/operators/security.md', 'README.md'])).toEqual([
      'docs/operators/security.md',
    ]);
  });
});
