import { readFileSync } from 'node:fs';
import { join } from 'node:path';

interface LockEntry {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/**
 * `npm ci` (npm 11) refuses a lock file in which a package's optional dependency has no entry — every
 * platform's native package of @swc/core or unrs-resolver, not only this machine's ("Missing:
 * @swc/core-darwin-arm64@ from lock file"). Image builds and users' CI run `npm ci`, so the lock file
 * must name them all; this is the check npm makes, without the network.
 */
describe('package-lock.json', () => {
  const lock = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };

  /** Where Node would find `name` from the package at `from` (its own node_modules, then each enclosing one). */
  const resolves = (from: string, name: string): boolean => {
    for (let dir = from; ;) {
      if (lock.packages[`${dir ? `${dir}/` : ''}node_modules/${name}`]) return true;
      if (!dir) return false;
      const cut = dir.lastIndexOf('/node_modules/');
      dir = cut < 0 ? '' : dir.slice(0, cut);
    }
  };

  it('has an entry for every optional dependency of every package, whatever its platform', () => {
    const missing = Object.entries(lock.packages).flatMap(([path, entry]) =>
      Object.keys(entry.optionalDependencies ?? {})
        .filter((name) => !resolves(path, name))
        .map((name) => `${name} (optional dependency of ${path || 'the root'})`),
    );
    expect(missing).toEqual([]);
  });

  it('is checked against something: the packages with native builds per platform are in it', () => {
    expect(Object.keys(lock.packages['node_modules/@swc/core']?.optionalDependencies ?? {}).length).toBeGreaterThan(5);
  });
});
