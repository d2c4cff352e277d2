import { Env } from '@robustrl/config';
import { ENGINES, INFERENCE_URL } from './agent-settings';

/**
 * The inference engines a rollout machine hosts, as its agent registers them (docs/integrators/engines.md).
 * One engine is `ROBUSTRL_INFERENCE_URL` and carries the machine's own id; several —
 * eight TP=1 engines on a node, two TP=4 ones — are `ROBUSTRL_ENGINES=name=url,name=url`, each named
 * `<machineId>/<name>`: the id the router routes by and trajectories are owned by, so a machine's
 * trajectories are found from any of its engines (the pool's `machineOfInstance`).
 */
export interface EngineEndpoint {
  engineId: string;
  url: string;
}

/** An engine's name on its machine (its id is `<machineId>/<name>`). */
export const ENGINE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const MAX_ENGINES = 64;

/** The id an engine named `name` on `machineId` is routed and owned by. */
export const engineIdOf = (machineId: string, name: string): string => `${machineId}/${name}`;

/** The engines of ROBUSTRL_ENGINES, or an Error naming what is wrong (the agent refuses to start with it). */
export function parseEngineList(machineId: string, list: string): EngineEndpoint[] {
  const items = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new Error('ROBUSTRL_ENGINES: no engine listed (name=url, comma separated)');
  if (items.length > MAX_ENGINES) throw new Error(`ROBUSTRL_ENGINES: ${items.length} engines listed, at most ${MAX_ENGINES} on a machine`);
  const seen = new Set<string>();
  return items.map((item) => {
    const eq = item.indexOf('=');
    const name = eq > 0 ? item.slice(0, eq) : '';
    const url = eq > 0 ? item.slice(eq + 1) : '';
    if (!ENGINE_NAME.test(name)) throw new Error(`ROBUSTRL_ENGINES: '${item}' is not name=url (a name of letters, digits, '.', '_' or '-')`);
    if (!/^https?:\/\/[^\s/]+/.test(url) || !URL.canParse(url)) throw new Error(`ROBUSTRL_ENGINES: '${item}': ${url || 'no URL'} is not an http(s) URL`);
    if (seen.has(name)) throw new Error(`ROBUSTRL_ENGINES: engine '${name}' listed twice`);
    seen.add(name);
    return { engineId: engineIdOf(machineId, name), url: url.replace(/\/+$/, '') };
  });
}

/** The machine's engines from its settings (agent-settings.ts): the list, the one URL (named as the machine), or none. */
export function enginesFromEnv(machineId: string, env: Env): EngineEndpoint[] {
  const list = ENGINES.read(env);
  const url = INFERENCE_URL.read(env);
  if (list !== undefined && url !== undefined)
    throw new Error('ROBUSTRL_ENGINES and ROBUSTRL_INFERENCE_URL: set one (the list names every engine, the URL is the one engine)');
  if (list !== undefined) return parseEngineList(machineId, list);
  return url ? [{ engineId: machineId, url }] : [];
}

/** Whether the machine names its engines itself (several, or one under its own name) rather than by `inferenceUrl`. */
export const listsEngines = (machineId: string, engines: EngineEndpoint[]): boolean => engines.some((e) => e.engineId !== machineId);
