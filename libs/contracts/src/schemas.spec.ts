import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { renderJsonSchemas } from './json-schemas';

const SCHEMAS_DIR = join(__dirname, '..', '..', '..', 'schemas');

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : [relative(SCHEMAS_DIR, join(dir, e.name))],
  );
}

describe('checked-in JSON Schemas', () => {
  it('match the zod contracts (run `npm run schemas:generate` after changing a contract)', () => {
    const expected = renderJsonSchemas();
    // schemas/simulation/ holds the simulator's scenario format (sim checks it).
    const onDisk = filesUnder(SCHEMAS_DIR).filter((f) => f.endsWith('.json') && !f.startsWith('simulation/'));
    expect(onDisk.sort()).toEqual([...expected.keys()].sort());
    for (const [file, content] of expected) {
      expect({ file, content: readFileSync(join(SCHEMAS_DIR, file), 'utf8') }).toEqual({ file, content });
    }
  });
});
