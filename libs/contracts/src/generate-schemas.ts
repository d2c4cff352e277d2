import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { renderJsonSchemas } from './json-schemas';

/** `npm run schemas:generate`: rewrite `schemas/` from the zod contracts. */
const outDir = resolve(__dirname, '../../../schemas');
for (const sub of ['events', 'commands']) rmSync(join(outDir, sub), { recursive: true, force: true });
const files = renderJsonSchemas();
for (const [rel, content] of files) {
  const path = join(outDir, rel);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
}
console.log(`wrote ${files.size} schema files to ${outDir}`);
