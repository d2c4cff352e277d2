import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The repository's top-level folders: a backticked token starting with one of them is a path. */
export const TOP_FOLDERS = ['.ci', 'bench', 'cli', 'clients', 'deploy', 'docs', 'domain', 'examples', 'libs', 'native', 'schemas', 'services', 'sim', 'test'];

/** Where paths are cited: documentation, and comments and strings in code and scripts. */
const CITING = /\.(md|ts|py|sh|cc|h|yaml|yml|mjs)$/;
/** A token with a placeholder or a pattern names no one file: `<job>`, `*.spec.ts`, `${ROOT}/x`, `step-…`. */
const PLACEHOLDER = /[<>*{}…$|]/;

export interface BrokenPath {
  file: string;
  line: number;
  path: string;
}

/**
 * Every backticked repository path in the given files that names nothing: not a file or folder from
 * the repository's root, nor from the citing file's folder (a package's README names its own `test/`).
 * A trailing `:line`, `#anchor` or punctuation is not part of the path.
 */
export function brokenPaths(files: ReadonlyArray<{ path: string; text: string }>, exists: (path: string) => boolean): BrokenPath[] {
  const out: BrokenPath[] = [];
  const tops = TOP_FOLDERS.map((t) => `${t}/`);
  for (const { path: file, text } of files) {
    for (const m of text.matchAll(/`([^`\s]+)`/g)) {
      const token = m[1]!;
      if (!tops.some((t) => token.startsWith(t)) || PLACEHOLDER.test(token)) continue;
      const path = token.replace(/[:#].*$/, '').replace(/[.,;)]+$/, '');
      if (exists(path) || exists(join(dirname(file), path))) continue;
      out.push({ file, line: text.slice(0, m.index).split('\n').length, path });
    }
  }
  return out;
}

const OWN_EXAMPLES = 'test/architecture/doc-paths.spec.ts';

/** The tracked files that cite paths, read from `root` (generated schemas and build output left out). */
export function citingFiles(root: string): Array<{ path: string; text: string }> {
  return (
    execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' })
      .split('\n')
      // The check's own spec cites broken paths and issue numbers on purpose, as its examples.
      .filter((f) => CITING.test(f) && !f.startsWith('schemas/') && !f.includes('/dist/') && f !== OWN_EXAMPLES && existsSync(join(root, f)))
      .map((f) => ({ path: f, text: readFileSync(join(root, f), 'utf8') }))
  );
}

/** A path exists in the checkout, or is one the project makes when it runs (ignored by git: `deploy/compose/secrets/`). */
export function existsOrMade(root: string): (path: string) => boolean {
  return (path) => {
    if (existsSync(join(root, path))) return true;
    try {
      execFileSync('git', ['check-ignore', '-q', '--no-index', path], { cwd: root, stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
}

/**
 * Lines of code, comments and test names that cite an issue of a tracker the repository does not hold
 * (`issue` and its number): a reader cannot follow it; the comment should say why, citing the doc section.
 * Markdown may tell history (docs/benchmarks.md) and is not held to it.
 */
export function issueCitations(files: ReadonlyArray<{ path: string; text: string }>): Array<{ file: string; line: number; text: string }> {
  const out: Array<{ file: string; line: number; text: string }> = [];
  for (const { path: file, text } of files) {
    if (file.endsWith('.md')) continue;
    text.split('\n').forEach((line, i) => {
      if (/\bissues? \d+/i.test(line)) out.push({ file, line: i + 1, text: line.trim() });
    });
  }
  return out;
}

/**
 * Markdown links that lead nowhere: a relative link (`[text](path)` or `(path#anchor)`) whose file is not
 * there, from the linking file's folder. Links to the web and to an anchor of the same page are not checked.
 */
export function brokenLinks(files: ReadonlyArray<{ path: string; text: string }>, exists: (path: string) => boolean): BrokenPath[] {
  const out: BrokenPath[] = [];
  for (const { path: file, text } of files) {
    if (!file.endsWith('.md')) continue;
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!.replace(/#.*$/, '');
      if (target === '' || /^[a-z]+:/i.test(target)) continue;
      if (exists(join(dirname(file), target))) continue;
      out.push({ file, line: text.slice(0, m.index).split('\n').length, path: target });
    }
  }
  return out;
}

/** The documents under `docs/` the README does not link to: each should be one link from the front page. */
export function docsNotLinkedFrom(readme: string, docs: readonly string[]): string[] {
  const linked = new Set([...readme.matchAll(/\]\(([^)\s#]+)(#[^)]*)?\)/g)].map((m) => m[1]!.replace(/^\.\//, '')));
  return docs.filter((d) => d.startsWith('docs/') && d.endsWith('.md') && !linked.has(d));
}
