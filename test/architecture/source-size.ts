import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The most lines a source file may have (docs/contributors/architecture.md): past it, it holds more than one concept. */
export const MAX_SOURCE_LINES = 500;

const SOURCE = /\.(ts|js|mjs|cjs|py|cc|h|go|sh)$/;
/** Tests, test support, generated and built files: held to no size. */
const EXEMPT = [/\.spec\.ts$/, /\.d\.ts$/, /^schemas\//, /\/dist\//, /(^|\/)tests?\//, /(^|\/)test_[^/]*\.py$/, /^libs\/testing\//, /\/spec-support\//];

/** The repository's source files (tracked, or new and not ignored) that count. */
export function sourceFiles(root: string): string[] {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .filter((f) => SOURCE.test(f) && !EXEMPT.some((re) => re.test(f)));
}

/** The files over the limit, with their line counts, largest first. */
export function oversized(files: ReadonlyArray<{ path: string; text: string }>, max = MAX_SOURCE_LINES): Array<{ path: string; lines: number }> {
  return files
    .map(({ path, text }) => ({ path, lines: text.split('\n').length - (text.endsWith('\n') ? 1 : 0) }))
    .filter((f) => f.lines > max)
    .sort((a, b) => b.lines - a.lines);
}

export const readSources = (root: string, files: readonly string[]) =>
  files.flatMap((path) => {
    try {
      return [{ path, text: readFileSync(join(root, path), 'utf8') }];
    } catch {
      return []; // deleted in the working tree, not yet in the index
    }
  });
