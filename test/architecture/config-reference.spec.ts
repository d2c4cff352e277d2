import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { registeredSettings } from '@robustrl/config';
import { CONFIGURATION_REFERENCE, configurationReference } from '../../cli/src/config-reference';

const ROOT = join(__dirname, '..', '..');

describe('the configuration reference is the registry', () => {
  it('the committed reference is what the registry generates (npm run config:generate)', () => {
    expect(readFileSync(join(ROOT, CONFIGURATION_REFERENCE), 'utf8')).toBe(configurationReference());
  });

  it('every owner that reads through the registry is in it, each variable with a meaning and a form', () => {
    const settings = registeredSettings();
    expect([...new Set(settings.map((s) => s.owner))].sort()).toEqual([
      'agent',
      'controller',
      'controller, rollout-manager',
      'detector',
      'main job',
      'request-manager',
      'router',
      'services',
      'weight-registry',
    ]);
    expect(settings.filter((s) => s.meaning.trim() === '' || s.accepted.trim() === '' || !s.name.startsWith('ROBUSTRL_'))).toEqual([]);
  });
});
