import type { EngineEndpoint } from '../engine-endpoints';
import { EnginePhase, EngineWeightSync, HeldVersion, LoadDeadline } from './engine-weight-sync';
import { VllmEngineClient } from './vllm-engine-client';

/**
 * Every engine a rollout machine's agent loads weight versions into (ROBUSTRL_ENGINE_WEIGHTS=vllm): one
 * sync per engine, all from the machine's one host copy (paper §5.2.1: a version is pulled once per
 * machine, then loaded into each engine there). The machine reports one phase for them all, the one that
 * says the most about its work (`machinePhase`); a wedged or silent engine is reported by its id.
 */
export class EngineSet {
  private readonly phases = new Map<string, { phase: EnginePhase; version: number }>();
  private readonly syncs: Array<{ engineId: string; sync: EngineWeightSync }>;

  constructor(
    engines: EngineEndpoint[],
    makeSync: (engine: EngineEndpoint, phase: (phase: EnginePhase, version: number) => void, onStalled: LoadDeadline['onStalled']) => EngineWeightSync,
    private readonly phase: (phase: EnginePhase, version: number) => void,
    onStalled: LoadDeadline['onStalled'],
  ) {
    const several = engines.length > 1;
    this.syncs = engines.map((e) => ({
      engineId: e.engineId,
      sync: makeSync(
        e,
        (p, version) => this.enginePhase(e.engineId, p, version),
        (detail, how, forMs) => onStalled(several ? `engine ${e.engineId}: ${detail}` : detail, how, forMs),
      ),
    }));
  }

  start(): void {
    for (const s of this.syncs) s.sync.start();
  }

  stop(): void {
    for (const s of this.syncs) s.sync.stop();
  }

  /** The machine's role restarted its engines (they restart together: the role process starts them all). */
  engineRestarted(): void {
    this.phases.clear();
    for (const s of this.syncs) s.sync.engineRestarted();
  }

  /** Each engine's last load by this agent, for the agent's status. */
  loads(): Array<{ engineId: string; loaded: { version: number; seconds: number } | null }> {
    return this.syncs.map((s) => ({ engineId: s.engineId, loaded: s.sync.lastLoad }));
  }

  /** One engine's phase, on each of its looks; the machine's goes to the agent, which reports a change. */
  private enginePhase(engineId: string, phase: EnginePhase, version: number): void {
    this.phases.set(engineId, { phase, version });
    const machine = machinePhase(this.phases.values());
    if (machine) this.phase(machine.phase, machine.version);
  }
}

/**
 * The machine's phase from its engines': `weight-update` while any loads a version (the machine's
 * rollouts wait on it), else `rollout` while any generates, else `idle` once every engine that answered
 * is idle; the version is the oldest any of them serves (what the whole machine can be relied on for).
 * Null until an engine has answered.
 */
export function machinePhase(phases: Iterable<{ phase: EnginePhase; version: number }>): { phase: EnginePhase; version: number } | null {
  const all = [...phases];
  if (all.length === 0) return null;
  const version = Math.min(...all.map((p) => p.version));
  for (const phase of ['weight-update', 'rollout'] as const) if (all.some((p) => p.phase === phase)) return { phase, version };
  return { phase: 'idle', version };
}

/**
 * The syncs of the vLLM engines the agent manages: each engine call's own timeout comes after the load
 * deadline, so the deadline is what ends a wedged load (`onStalled`, with the engine's id in the detail
 * when the machine hosts several).
 */
export function managedVllmEngines(
  config: { engines: EngineEndpoint[]; engineLoadDeadlineMs: number },
  held: () => HeldVersion | null,
  phase: (phase: EnginePhase, version: number) => void,
  onStalled: LoadDeadline['onStalled'],
): EngineSet {
  if (config.engines.length === 0)
    throw new Error('ROBUSTRL_ENGINE_WEIGHTS=vllm needs ROBUSTRL_INFERENCE_URL or ROBUSTRL_ENGINES: the engines the agent loads versions into');
  const deadlineMs = config.engineLoadDeadlineMs;
  return new EngineSet(
    config.engines,
    (e, enginePhase, stalled) =>
      new EngineWeightSync(new VllmEngineClient(e.url, deadlineMs + 30_000), held, e.engineId, 500, enginePhase, undefined, { deadlineMs, onStalled: stalled }),
    phase,
    onStalled,
  );
}
