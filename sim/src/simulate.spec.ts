import { readFileSync } from 'node:fs';
import type { MessageOf, RobustrlMessage } from '@robustrl/contracts';
import { join } from 'node:path';
import { builtInScenario, builtInScenarios } from './scenarios/paper-workloads';
import { parseScenario, renderScenarioSchema, Scenario, ScenarioInput, SCENARIO_SCHEMA_FILE } from './scenario';
import { runStrategy, simulate } from './simulate';

/** A small job (2 + 2 machines, 12 steps) so the specs stay fast; the paper's scenarios are in the benchmark and the docs. */
function smallJob(overrides: Partial<ScenarioInput> = {}): Scenario {
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
    // No task restart; a machine faulted past its restart budget is retired (a warm standby and its refill).
    expect(robust.restartBreakdown.map((b) => b.kind)).toContain('trainer-restart');
    expect(robust.restartBreakdown.map((b) => b.kind)).not.toContain('task-restart');
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

  describe('the recoveries beyond a trainer process restart', () => {
    /** Every message of one run as `type` plus what tells it apart: the decision's action and rule, the command's machine. */
    function run(scenario: Scenario, seed: number) {
      const decisions: Array<[string, string]> = [];
      const messages: RobustrlMessage[] = [];
      const r = runStrategy(scenario, 'robustrl', seed, {
        validateMessages: true,
        onMessage: (_s, m) => {
          messages.push(m);
          if (m.type === 'RecoveryDecided') decisions.push([m.data.action, m.data.rule]);
        },
      });
      const ofType = <T extends RobustrlMessage['type']>(type: T) => messages.filter((m): m is MessageOf<T> => m.type === type);
      return { r, decisions, ofType };
    }
    const hardwareTrainerFaults = (mode: 'semi-sync' | 'sync') =>
      smallJob({ mode, faults: { trainerEveryStepsFraction: 0.25, rolloutFaultsPerMachineHour: 0, trainerHardwareFraction: 1 } });

    it('semi-sync: a trainer GPU failure borrows a rollout as warm standby, refills the pool, and the group trains on with it', () => {
      const { r, decisions, ofType } = run(hardwareTrainerFaults('semi-sync'), 3);
      expect(r.steps).toBe(12);
      expect(decisions).toContainEqual(['warm-standby-from-rollout', 'trainer-machine-faulty']);
      const promoted = ofType('PromoteRolloutToTrainer').map((m) => m.data.rolloutMachineId);
      expect(promoted.length).toBeGreaterThan(0);
      expect(ofType('RecoveryCommandFailed')).toEqual([]);
      // The standby is in the group the next restart re-forms; the faulty machine is refilled as a rollout.
      const restarts = ofType('RestartTrainerGroup');
      expect(restarts.some((m) => m.data.machines.includes(promoted[0]))).toBe(true);
      expect(ofType('ReplaceMachine').some((m) => m.data.role === 'rollout' && m.data.machineId.startsWith('trainer-'))).toBe(true);
      expect(ofType('MachineRoleChanged').map((m) => [m.data.machineId, m.data.to])).toContainEqual([promoted[0], 'trainer']);
      expect(ofType('RecoveryCompleted').filter((m) => m.data.outcome !== 'recovered')).toEqual([]);
      expect(r.restartBreakdown.map((b) => b.kind)).toEqual(expect.arrayContaining(['trainer-restart', 'warm-standby', 'rollout-replacement']));
    });

    it('sync: the same failure asks for a new trainer machine; the group restarts with it', () => {
      const { r, decisions, ofType } = run(hardwareTrainerFaults('sync'), 3);
      expect(r.steps).toBe(12);
      expect(decisions).toContainEqual(['request-new-trainer-machine', 'trainer-machine-faulty']);
      expect(decisions.map(([action]) => action)).not.toContain('warm-standby-from-rollout');
      const replacement = ofType('RecoveryCommandSucceeded').find((m) => m.data.newMachineId?.startsWith('trainer-'));
      expect(replacement).toBeDefined();
      expect(ofType('RestartTrainerGroup').some((m) => m.data.machines.includes(replacement!.data.newMachineId!))).toBe(true);
    });

    it('a crashed rollout engine restarts in place; the machine stays and pulls the weights again', () => {
      const { r, decisions, ofType } = run(
        smallJob({ faults: { trainerEveryStepsFraction: null, rolloutFaultsPerMachineHour: 3, rolloutProcessFraction: 1 } }),
        4,
      );
      expect(r.steps).toBe(12);
      expect(decisions).toContainEqual(['restart-rollout-engine', 'rollout-process-fault']);
      const restarted = ofType('RestartRolloutEngine').map((m) => m.data.machineId);
      expect(restarted.length).toBeGreaterThan(0);
      // Machines restarted in place re-register and are assigned the current weights again.
      const registeredAfter = ofType('MachineRegistered').filter((m) => m.data.machineId === restarted[0]);
      expect(registeredAfter.length).toBeGreaterThanOrEqual(2);
      expect(ofType('WeightPullAssigned').some((m) => m.data.pullerId === restarted[0])).toBe(true);
      expect(r.restartBreakdown.map((b) => b.kind)).toContain('engine-restart');
      // Past the budget a machine is replaced and the decision says why; none of them is a silent failure.
      for (const [action, rule] of decisions) if (action === 'replace-rollout') expect(rule).toBe('rollout-restart-budget-spent');
      expect(ofType('FaultConfirmed').filter((m) => m.data.rule === 'rollout-silent')).toEqual([]);
    });

    it('a fault that strikes its step again escalates to a task restart (paper §5.1.2 rule 2), and the job finishes', () => {
      const { r, decisions, ofType } = run(
        smallJob({ faults: { trainerEveryStepsFraction: 0.25, rolloutFaultsPerMachineHour: 0, repeatInStepProbability: 1 } }),
        2,
      );
      expect(r.steps).toBe(12);
      expect(decisions).toContainEqual(['restart-task', 'escalate-repeated-fault-in-step']);
      expect(ofType('RestartTask').map((m) => m.data.rule)).toContain('escalate-repeated-fault-in-step');
      expect(r.restartBreakdown.map((b) => b.kind)).toEqual(expect.arrayContaining(['trainer-restart', 'task-restart']));
    });
  });

  it('every fault kind mixed, async: each run finishes, every recovery ends recovered or escalated by a rule', () => {
    const mixes = [
      {
        trainerEveryStepsFraction: 0.25,
        rolloutFaultsPerMachineHour: 1,
        trainerHardwareFraction: 0.5,
        rolloutProcessFraction: 0.5,
        repeatInStepProbability: 0.3,
      },
      // Both rollouts lost right after the trainer released the newest version to them: it was retired
      // with no holder, and the trainer must publish it again (a run of this seed once waited forever).
      { trainerEveryStepsFraction: 0.25, rolloutFaultsPerMachineHour: 1, rolloutProcessFraction: 0.5 },
    ];
    for (const [faults, seeds] of [
      [mixes[0], [3, 6]],
      [mixes[1], [8]],
    ] as const) {
      for (const seed of seeds) {
        const outcomes: string[] = [];
        const escalations: string[] = [];
        const r = runStrategy(smallJob({ mode: 'async', faults }), 'robustrl', seed, {
          onMessage: (_s, m) => {
            if (m.type === 'RecoveryCompleted') outcomes.push(m.data.outcome);
            if (m.type === 'RestartTask') escalations.push(m.data.rule);
          },
        });
        expect(r.steps).toBe(12);
        expect(outcomes.length).toBeGreaterThan(0);
        expect(outcomes.filter((o) => o !== 'recovered' && o !== 'escalated')).toEqual([]);
        for (const rule of escalations) expect(rule).toMatch(/^escalate-/);
      }
    }
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
