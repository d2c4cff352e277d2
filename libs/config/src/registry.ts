/**
 * What robustrl reads from its environment, one entry per variable and reader (docs/operators/configuration.md):
 * each reader registers itself when it is defined, so the reference is generated from the code that
 * reads, and cannot drift from it (`renderReference`, checked by test/architecture/config-reference.spec.ts).
 */
export interface SettingInfo {
  /** The variable, e.g. `ROBUSTRL_COMMAND_TIMEOUT_SECONDS`. */
  name: string;
  /** Who reads it: a service (`controller`, `agent`, …), `services` (every service), `main job`, `cli`. */
  owner: string;
  /** What it sets, in a sentence (Markdown). */
  meaning: string;
  /** What it may be set to, as the error for a bad value says it (e.g. `a positive number of seconds`). */
  accepted: string;
  /** What applies when it is unset or empty, as a reader would say it (e.g. `600`, `none`). */
  defaultText: string;
}

/** A variable set to a value its reader does not accept: start-up stops with this, naming the variable and the form. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    readonly accepted: string,
    readonly got: string,
  ) {
    super(`${variable} must be ${accepted}, got '${got}'`);
    this.name = 'ConfigError';
  }
}

const REGISTERED = new Map<string, SettingInfo>();
const keyOf = (s: Pick<SettingInfo, 'owner' | 'name'>) => `${s.owner}\u0000${s.name}`;

/**
 * Adds a variable to the registry. Defining the same reader again (a module loaded twice) is harmless;
 * the same variable and owner registered with another meaning, form or default is a mistake in the code.
 */
export function register(info: SettingInfo): void {
  if (!/^[A-Z][A-Z0-9_]*$/.test(info.name)) throw new Error(`a setting's name is an environment variable's, got '${info.name}'`);
  const known = REGISTERED.get(keyOf(info));
  if (known && JSON.stringify(known) !== JSON.stringify(info))
    throw new Error(`${info.name} is registered twice for ${info.owner}, differently: ${JSON.stringify(known)} and ${JSON.stringify(info)}`);
  REGISTERED.set(keyOf(info), { ...info });
}

/** Every registered variable, by owner then name. */
export function registeredSettings(): SettingInfo[] {
  return [...REGISTERED.values()].sort((a, b) => a.owner.localeCompare(b.owner) || a.name.localeCompare(b.name));
}
