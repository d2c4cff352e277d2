import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { builtInScenario, builtInScenarios } from './scenarios/paper-workloads';
import { parseScenario, renderScenarioSchema, Scenario, SCENARIO_SCHEMA_FILE } from './scenario';
import { runStrategy, simulate } from './simulate';

/** A small job (2 + 2 machines, 12 steps) so the specs stay fast; the paper's scenarios are in the benchmark and the docs. */
function smallJob(overrides: Partial<Scenario> = {}): Scenario {
  const base = builtInScenario('qwen3-8b-math-semi-sync')!;
  return parseScenario({
    ...base,
    name: 'small',
    cluster: { trainerMachines: 2, rolloutMachines: 2, gpusPerMachine: 8 },
    steps: 12,
    batch: { prompts: 8, responsesPerPrompt: 4 },
    ...overrides,
  });
}

describe('simulator', () => {
  it('drives the real deciders with messages the contracts accept (every message schema-checked)', () => {
    const seen = new Map<string, number>();
    const report = simulate(smallJob({ faults: { trainerEveryStepsFraction: 0.25, rolloutFaultsPerMachineHour: 2 } }), {
      seed: 7,
      strategies: ['robustrl'],
      validateMessages: true,
      onMessage: (_s, m) => seen.set(`${m.source.split('/')[0]}:${m.type}`, (seen.get(`${m.source.split('/')[0]}:${m.type}`) ?? 0) + 1),
    });
    const [r] = report.strategies;
    expect(r.steps).toBe(12);
    // Decisions come from the services' deciders, not from the simulator.
    expect(seen.get('detector:FaultConfirmed')).toBeGreaterThan(0);
    expect(seen.get('controller:RecoveryDecided')).toBeGreaterThan(0);
    expect(seen.get('controller:RestartTrainerGroup')).toBeGreaterThan(0);
    expect(seen.get('weight-registry:WeightPullAssigned')).toBeGreaterThan(0);
    expect(seen.get('detector:HeartbeatProbeRequested')).toBeGreaterThan(0);
    expect([...seen.keys()].some((k) => k.startsWith('sim:') || k.startsWith('agent:'))).toBe(true);
    expect(
      [...seen.keys()]
        .filter((k) => k.endsWith(':RecoveryDecided') || k.endsWith(':FaultConfirmed'))
        .every((k) => k.startsWith('controller:') || k.startsWith('detector:')),
    ).toBe(true);
    expect(r.faults).toBeGreaterThan(0);
    expect(r.restarts).toBeGreaterThan(0);
  });

  it('without faults every strategy is within 1 point of the fault-free run', () => {
    const job = smallJob({ faults: { trainerEveryStepsFraction: null, rolloutFaultsPerMachineHour: 0 } });
    const report = simulate(job, { seed: 3 });
    const none = report.strategies.find((s) => s.strategy === 'none')!;
    for (const s of report.strategies) {
      expect(Math.abs(s.ettr - none.ettr)).toBeLessThanOrEqual(0.01);
      expect(s.faults).toBe(0);
      expect(s.restarts).toBe(0);
    }
  });

  it('the same seed gives the same report byte for byte; another seed gives another run', () => {
    const job = smallJob({ faults: { trainerEveryStepsFraction: 0.25, rolloutFaultsPerMachineHour: 1 } });
    const a = JSON.stringify(simulate(job, { seed: 11 }));
    const b = JSON.stringify(simulate(job, { seed: 11 }));
    const c = JSON.stringify(simulate(job, { seed: 12 }));
    expect(a).toBe(b);
    expect(c).not.toBe(a);
  });

  it('more faults never raise ETTR', () => {
    for (const strategy of ['task-restart', 'robustrl'] as const) {
      const ettrs = [null, 0.5, 0.25, 0.125].map(
        (every) => runStrategy(smallJob({ steps: 16, faults: { trainerEveryStepsFraction: every, rolloutFaultsPerMachineHour: 0 } }), strategy, 5).ettr,
      );
      for (let i = 1; i < ettrs.length; i++) expect(ettrs[i]).toBeLessThanOrEqual(ettrs[i - 1]);
      expect(ettrs[3]).toBeLessThan(ettrs[0]);
    }
  });

  it('task restarts lose rollout work; role-based recovery keeps it', () => {
    const job = smallJob({ faults: { trainerEveryStepsFraction: 0.25, rolloutFaultsPerMachineHour: 0 } });
    const report = simulate(job, { seed: 2, strategies: ['task-restart', 'robustrl'] });
    const [task, robust] = report.strategies;
    expect(task.lostRolloutSeconds).toBeGreaterThan(0);
    expect(robust.lostRolloutSeconds).toBe(0);
    expect(robust.ettr).toBeGreaterThan(task.ettr);
    expect(robust.wallClockSeconds).toBeLessThan(task.wallClockSeconds);
    expect(task.restartBreakdown.map((b) => b.kind)).toEqual(['task-restart']);
    expect(robust.restartBreakdown.map((b) => b.kind)).toEqual(['trainer-restart']);
    expect(report.comparison!.timeSavedFraction).toBeGreaterThan(0);
  });

  it('a silent rollout machine is found by the detector, replaced, and its trajectories move on', () => {
    const messages: string[] = [];
    const r = runStrategy(smallJob({ faults: { trainerEveryStepsFraction: null, rolloutFaultsPerMachineHour: 3 } }), 'robustrl', 4, {
      onMessage: (_s, m) => messages.push(m.type === 'FaultConfirmed' ? `FaultConfirmed:${m.data.rule}` : m.type),
    });
    expect(r.steps).toBe(12);
    expect(messages).toContain('FaultConfirmed:rollout-silent');
    expect(messages).toContain('ReplaceMachine');
    expect(messages).toContain('MachineDeregistered');
    expect(r.downtimeByCategory.find((c) => c.category === 'detection')!.gpuHours).toBeGreaterThan(0);
  });

  it('built-in scenarios name a source for what they assume', () => {
    const all = builtInScenarios();
    expect(all.map((s) => s.name)).toEqual(
      expect.arrayContaining(['qwen3-8b-math-sync', 'qwen3-8b-math-semi-sync', 'qwen3-8b-math-async', 'qwen3-32b-math-semi-sync', 'qwen3-32b-swe-async']),
    );
    for (const s of all) {
      for (const key of [
        'cluster',
        'steps',
        'batch',
        'rollout.responseSeconds',
        'training.stepSeconds',
        'restart.instanceRestartSeconds',
        'faults.trainerEveryStepsFraction',
      ]) {
        expect(s.sources[key]).toMatch(/paper|assumed/);
      }
    }
  });

  it('rejects an invalid scenario with the field that is wrong', () => {
    const bad = { ...smallJob(), steps: 0, rollout: { ...smallJob().rollout, turns: { min: 3, max: 1 } } };
    expect(() => parseScenario(bad, 'my.json')).toThrow(/my\.json is not a valid simulation scenario:\n {2}steps:/);
    expect(() => parseScenario({ ...smallJob(), rollout: { ...smallJob().rollout, turns: { min: 3, max: 1 } } }, 'my.json')).toThrow(
      /turns\.max must be at least/,
    );
  });
});

describe('scenario format', () => {
  it('the checked-in JSON Schema matches the zod scenario (run `npm run schemas:generate` after changing it)', () => {
    expect(readFileSync(join(__dirname, '..', '..', 'schemas', SCENARIO_SCHEMA_FILE), 'utf8')).toBe(renderScenarioSchema());
  });
});
