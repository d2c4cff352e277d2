import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { registeredSettings, renderReference } from '@robustrl/config';
// Each owner's readers, loaded for the registry they fill (docs/operators/configuration.md).
import '@robustrl/agent';
import '@robustrl/bus';
import '@robustrl/controller';
import '@robustrl/detector';
import '@robustrl/embedded';
import '@robustrl/orchestrator';
import '@robustrl/request-manager';
import '@robustrl/rollout-manager';
import '@robustrl/service-kit';
import '@robustrl/store';
import '@robustrl/telemetry';
import '@robustrl/weight-registry';

/** Where the generated reference lives, from the repository's root. */
export const CONFIGURATION_REFERENCE = 'docs/operators/configuration-reference.md';

/** The reference as the registry of the loaded readers says it. */
export function configurationReference(): string {
  return renderReference(registeredSettings());
}

/** `npm run config:generate`: writes the reference (a spec fails while the committed one differs). */
if (require.main === module) {
  const root = join(__dirname, '..', '..');
  writeFileSync(join(root, CONFIGURATION_REFERENCE), configurationReference());
  process.stdout.write(`wrote ${CONFIGURATION_REFERENCE} (${registeredSettings().length} variables)\n`);
}
