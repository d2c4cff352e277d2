import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { importsOf } from './layering';

/**
 * Import cycles in the code base (docs/contributors/architecture.md): none between files, none between
 * workspace packages. Type-only imports count: a cycle of types is still two files that cannot be read
 * one without the other, and the cure is the same (the shared shapes in a leaf file of their own).
 *
 * Specs and their support files are left out, as in the layering check: what ships is what is checked.
 */

/** The folders whose TypeScript is checked (every workspace package, the benches, the test harness). */
export const CHECKED_ROOTS = ['libs', 'domain', 'services', 'sim', 'cli', 'bench', 'native', 'test', 'examples', 'clients'] as const;

const SKIPPED = new Set(['node_modules', 'dist', 'build', 'spec-support', '.venv', '.git']);

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    if (SKIPPED.has(entry)) continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (/\.ts$/.test(entry) && !/\.spec\.ts$|\.d\.ts$/.test(entry)) out.push(path);
  }
  return out;
}

/** Strongly connected components of more than one node (Tarjan), each sorted, the list sorted: a stable report. */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  // Iterative, so a long chain of imports cannot overflow the call stack.
  for (const root of graph.keys()) {
    if (index.has(root)) continue;
    const work: Array<{ node: string; edge: number }> = [{ node: root, edge: 0 }];
    index.set(root, next);
    low.set(root, next++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const edges = graph.get(frame.node) ?? [];
      if (frame.edge < edges.length) {
        const to = edges[frame.edge++];
        if (!index.has(to)) {
          index.set(to, next);
          low.set(to, next++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, edge: 0 });
        } else if (onStack.has(to)) low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        if (component.length > 1) out.push(component.sort());
      }
    }
  }
  return out.sort((a, b) => a[0].localeCompare(b[0]));
}

function resolveRelative(from: string, specifier: string, files: ReadonlySet<string>): string | null {
  const base = resolve(from, '..', specifier.replace(/\.js$/, ''));
  for (const candidate of [`${base}.ts`, join(base, 'index.ts')]) if (files.has(candidate)) return candidate;
  return null;
}

/** Each file under `root` (relative to it) with the files it imports by relative path. */
export function fileGraph(root: string, roots: readonly string[] = CHECKED_ROOTS): Map<string, string[]> {
  const files = roots.filter((r) => existsSync(join(root, r))).flatMap((r) => sourceFiles(join(root, r)));
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = importsOf(readFileSync(file, 'utf8'))
      .filter((s) => s.startsWith('.'))
      .map((s) => resolveRelative(file, s, known))
      .filter((t): t is string => t !== null);
    graph.set(
      relative(root, file),
      [...new Set(targets)].map((t) => relative(root, t)),
    );
  }
  return graph;
}

/** The file-level cycles under `root` (paths relative to it). */
export function fileCycles(root: string, roots: readonly string[] = CHECKED_ROOTS): string[][] {
  return cyclesOf(fileGraph(root, roots));
}

/**
 * The evolve modules a domain's decide module reaches, directly or through the files it imports: decide
 * reads the state and returns drafts; how a fact changes the state is evolve's alone (docs/contributors/
 * architecture.md). A fold both need (a command's outcome) lives in a file of its own that both import.
 */
export function decideReachingEvolve(graph: ReadonlyMap<string, readonly string[]>): Array<{ decide: string; evolve: string }> {
  const out: Array<{ decide: string; evolve: string }> = [];
  for (const decide of [...graph.keys()].filter((f) => /^domain\/[^/]+\/src\/[^/]+\.decide\.ts$/.test(f)).sort()) {
    const seen = new Set<string>([decide]);
    const queue = [decide];
    while (queue.length > 0) {
      for (const next of graph.get(queue.shift()!) ?? []) {
        if (seen.has(next)) continue;
        seen.add(next);
        queue.push(next);
      }
    }
    for (const f of [...seen].sort()) if (f.endsWith('.evolve.ts')) out.push({ decide, evolve: f });
  }
  return out;
}

/** The package-level cycles: workspace package A imports B and B (through its files) imports A. */
export function packageCycles(root: string, roots: readonly string[] = CHECKED_ROOTS): string[][] {
  const packages = new Map<string, string>();
  const packageOfFile = (file: string): string | null => {
    for (let dir = resolve(file, '..'); dir.startsWith(root) && dir !== root; dir = resolve(dir, '..')) {
      const manifest = join(dir, 'package.json');
      if (!existsSync(manifest)) continue;
      const name = (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name;
      if (name) packages.set(name, dir);
      return name ?? null;
    }
    return null;
  };
  const graph = new Map<string, Set<string>>();
  for (const file of roots.filter((r) => existsSync(join(root, r))).flatMap((r) => sourceFiles(join(root, r)))) {
    const from = packageOfFile(file);
    if (from === null) continue;
    const edges = graph.get(from) ?? new Set<string>();
    graph.set(from, edges);
    for (const specifier of importsOf(readFileSync(file, 'utf8'))) {
      const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0];
      if (name.startsWith('@robustrl/') && name !== from) edges.add(name);
    }
  }
  return cyclesOf(new Map([...graph].map(([k, v]) => [k, [...v].filter((p) => graph.has(p))])));
}
