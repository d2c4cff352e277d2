import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { registeredSettings } from '@robustrl/config';
import { HTTP_AUTH_SETTINGS } from '@robustrl/service-kit';
import { CONFIGURATION_REFERENCE, configurationReference } from '../../cli/src/config-reference';

const ROOT = join(__dirname, '..', '..');

/**
 * Names robustrl WRITES into a child process's environment and never reads itself (docs/integrators/agent-api.md):
 * the framework's process reads them (clients/python), so they are no setting of robustrl's.
 */
const WRITTEN: Readonly<Record<string, string>> = {
  ROBUSTRL_AGENT_URL: "role-env.ts: where the role process's agent listens",
  ROBUSTRL_AGENT_PID: "role-env.ts: the agent's pid, so the role process notices its agent is gone",
  ROBUSTRL_AGENT_TOKEN: "role-env.ts: the role process's own token of the agent's API",
  ROBUSTRL_RESTART_COUNT: 'role-env.ts: how often the agent restarted the role process',
  ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP: 'trainer-group.ts: the checkpoint step a restarted trainer resumes from',
  ROBUSTRL_RETRY_STEP: 'trainer-group.ts: the step a restarted trainer retries',
  ROBUSTRL_KEEP_BATCH: 'trainer-group.ts: whether a restarted trainer keeps its batch',
  ROBUSTRL_BATCH_ID: 'trainer-group.ts: the batch a restarted trainer keeps',
  ROBUSTRL_RANK: "trainer-group.ts: the trainer's rank in its group (robustrl's name for torch's RANK)",
  ROBUSTRL_WORLD_SIZE: "trainer-group.ts: the trainer group's size (robustrl's name for torch's WORLD_SIZE)",
  ROBUSTRL_GROUP: "trainer-group.ts: the trainer group's machines, in rank order",
  ROBUSTRL_TRAINER_EPOCH: "trainer-group.ts: the trainer group's epoch",
};

/** Prefixes of names composed in code (`<prefix>_TOKENS`, …), each of whose concrete names is registered (http-auth.ts). */
const PREFIXES = new Set(Object.keys(HTTP_AUTH_SETTINGS));

/** What robustrl ships: the libraries', services', CLI's and simulator's sources, without specs and test helpers. */
const SHIPPED = ['libs', 'services'].flatMap((d) => readdirSync(join(ROOT, d)).map((p) => join(d, p, 'src'))).concat(['cli/src', 'sim/src']);
const NOT_SHIPPED = [/\.spec\.ts$/, /(^|\/)spec-support\//, /^libs\/testing\//, /^libs\/harness\//];

function shippedSources(): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  const walk = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(join(ROOT, dir), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.name.endsWith('.ts') && !NOT_SHIPPED.some((r) => r.test(path))) out.push({ path, text: readFileSync(join(ROOT, path), 'utf8') });
    }
  };
  SHIPPED.forEach(walk);
  return out;
}

/**
 * Every `ROBUSTRL_*` name in `sources` (comments included: a name a comment tells an operator to set must be one
 * robustrl reads) that is neither registered, nor written for a child process, nor a prefix; a name ending in
 * `_` is the start of one composed in code. By name, the files it is in.
 */
function unregisteredNames(sources: readonly { path: string; text: string }[], registered: ReadonlySet<string>): Record<string, string[]> {
  const found: Record<string, string[]> = {};
  for (const { path, text } of sources)
    for (const [name] of text.matchAll(/ROBUSTRL_[A-Z0-9_]+/g)) {
      if (name.endsWith('_') || registered.has(name) || name in WRITTEN || PREFIXES.has(name)) continue;
      const files = (found[name] ??= []);
      if (!files.includes(path)) files.push(path);
    }
  return found;
}

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
    // robustrl's own names, and the standard ones of what it connects to: Kafka, PostgreSQL, OpenTelemetry.
    const named = (name: string) => /^(ROBUSTRL_|KAFKA_|OTEL_)/.test(name) || name === 'DATABASE_URL';
    expect(settings.filter((s) => s.meaning.trim() === '' || s.accepted.trim() === '' || !named(s.name))).toEqual([]);
  });

  it('every ROBUSTRL_ variable the shipped code names is registered, unless robustrl only writes it for a child process', () => {
    const registered = new Set(registeredSettings().map((s) => s.name));
    const sources = shippedSources();
    expect(sources.length).toBeGreaterThan(100);
    expect(unregisteredNames(sources, registered)).toEqual({});
    // A written name is no setting: one that is read too belongs in the registry, not in WRITTEN.
    expect(Object.keys(WRITTEN).filter((name) => registered.has(name))).toEqual([]);
    // Each written name is still written somewhere shipped (the list does not outlive the code).
    expect(Object.keys(WRITTEN).filter((name) => !sources.some((s) => s.text.includes(`${name}:`)))).toEqual([]);
  });

  it('the drift check catches a name read by hand and not registered', () => {
    const source = { path: 'services/x/src/x.ts', text: 'const v = env.ROBUSTRL_NOT_REGISTERED_SPEC ?? env[`ROBUSTRL_K8S_${k}`] ?? env.ROBUSTRL_AGENT_URL;' };
    expect(unregisteredNames([source], new Set())).toEqual({ ROBUSTRL_NOT_REGISTERED_SPEC: ['services/x/src/x.ts'] });
  });
});
