/**
 * What the agent does next about its engine's weights (pure): the engine says which version it serves
 * (vLLM's `/weight_info`, stamped by the load sequence; `default` until anything was stamped); the agent
 * holds the newest version it pulled whole. A fresh or restarted engine serves the model it started
 * from — the job's version 0, stamped so — and any newer version the agent holds is loaded into it.
 */
export type EngineWeightAction = { kind: 'wait' } | { kind: 'stamp-base' } | { kind: 'load'; version: number };

export function nextEngineWeightAction(engineVersion: string | null, heldVersion: number | null): EngineWeightAction {
  // Not answering (starting, restarting, gone): nothing to do until it does.
  if (engineVersion === null) return { kind: 'wait' };
  const serving = /^\d+$/.test(engineVersion) ? Number(engineVersion) : null;
  // Stamped first, whatever is held: until then its tokens carry no version of robustrl's and the router
  // tags them with the version the machine holds — which a restarted engine has not loaded yet.
  if (serving === null) return { kind: 'stamp-base' };
  if (heldVersion !== null && heldVersion > serving) return { kind: 'load', version: heldVersion };
  return { kind: 'wait' };
}
