import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { renderScenarioSchema, SCENARIO_SCHEMA_FILE } from './scenario';

/** `npm run schemas:generate` (second half): rewrite schemas/simulation/scenario.schema.json from the zod scenario. */
const path = resolve(__dirname, '../../schemas', SCENARIO_SCHEMA_FILE);
mkdirSync(dirname(path), { recursive: true });
writeFileSync(path, renderScenarioSchema());
console.log(`wrote ${path}`);
