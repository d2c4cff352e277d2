import { downtimeLedger, ettrReport, slidingEttr } from './ettr-report';
import type { EttrView, MachineView } from './ettr-view';
import { createEttrProjection, EttrInput, viewAt } from './ettr.projection';
import type { EttrView as ReferenceView } from '../test/full-recompute/ettr-view';
import { createEttrProjection as createReference, viewAt as referenceViewAt } from '../test/full-recompute/ettr.projection';
import { ledgerEntries } from './time-accounting';
import { prng } from '@robustrl/testing/seeded-random';
import { RecoveryAction, type Role, RolePhase } from '@robustrl/contracts';

/**
 * At scale: the ETTR projection accounts a machine when it changes, not on every event, and
 * keeps its open outages and held machines indexed. These specs hold it to the projection as it was
 * (`domain/ettr/test/full-recompute/`: every event accounted every machine) on random jobs: after every event the same
 * totals, sliding series and ledger (to the GPU-millisecond: the sums are of whole numbers), the same
 * outages, and once settled the same machines; read later (`viewAt`), the same report.
 */

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const PHASES = RolePhase.options;
const ACTIONS = RecoveryAction.options;

/** The machine as the reference keeps it (the incremental projection's bookkeeping left out). */
function facts(m: MachineView) {
  const { accountedTo: _a, countsAs: _c, countsGpus: _g, countsGenerating: _r, countsSide: _s, countsServing: _v, ...rest } = m;
  return rest;
}

const ledgerByKey = (rows: ReadonlyArray<{ category: string; outageId: string | null; machineId: string; gpuMs: number }>) =>
  Object.fromEntries(rows.map((r) => [`${r.category}|${r.outageId ?? ''}|${r.machineId}`, r.gpuMs]));

function randomJob(seed: number, events: number) {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T | undefined => (xs.length ? xs[Math.floor(rnd() * xs.length)] : undefined);
  const settings = { windowMs: 300_000, sampleMs: 60_000, maxBuckets: rnd() < 0.3 ? 5 : 20_160 };
  const projection = createEttrProjection(settings);
  const reference = createReference(settings);
  let view: EttrView = projection.initialView();
  let expected: ReferenceView = reference.initialView();
  let t = 0;
  let fresh = 0;
  let verdicts = 0;
  const machines = new Map<string, Role>();
  const recoveries: string[] = [];
  const mismatches: string[] = [];

  const msg = (type: string, data: Record<string, unknown>, at = t): EttrInput =>
    ({ type, jobId: `job-${seed}`, occurredAt: new Date(T0 + at).toISOString(), data }) as unknown as EttrInput;
  const register = (machineId: string, role: Role) => {
    machines.set(machineId, role);
    return msg('MachineRegistered', { machineId, role, zone: 'z', hardwareClass: 'h', gpus: pick([1, 4, 8, 8, 8])!, agentAddress: 'a', dpRank: null });
  };
  const someMachine = () => pick([...machines.keys()]);
  const recoveryCommand = () => ({ recoveryId: pick(recoveries) ?? 'unknown/recovery', commandId: `c${fresh++}` });

  const HANDOVERS = ['waiting', 'saved', 'given-up'] as const;
  const next = (): EttrInput => {
    const r = rnd();
    if (r < 0.06 || machines.size < 3)
      return register(rnd() < 0.3 && machines.size > 0 ? someMachine()! : `m${fresh++}`, pick(['trainer', 'rollout', 'rollout', 'hybrid'] as const)!);
    if (r < 0.45) {
      const machineId = someMachine()!;
      return msg('RolePhaseChanged', { machineId, role: machines.get(machineId), phase: pick(PHASES), step: 0, changedAt: new Date(T0 + t).toISOString() });
    }
    if (r < 0.55) {
      const machineId = rnd() < 0.95 ? someMachine()! : `ghost-${fresh++}`;
      return msg('FaultConfirmed', {
        verdictId: rnd() < 0.1 && verdicts > 0 ? `${machineId}/v${Math.floor(rnd() * verdicts)}` : `${machineId}/v${verdicts++}`,
        machineId,
        role: machines.get(machineId) ?? 'rollout',
        rule: 'explicit-signal',
        // Some are notices: a departing trainer's group is held from its move, not its notice.
        evidence: rnd() < 0.2 ? { signal: 'node-draining' } : {},
        handledAs: rnd() < 0.5 ? 'trainer' : 'rollout',
        machineFaulty: false,
        detectionLatencyMs: Math.floor(rnd() * 120_000),
      });
    }
    if (r < 0.65) {
      const open = Object.values(expected.outages).filter((o) => o.recoveryId === null);
      const o = pick(open) ?? pick(Object.values(expected.outages));
      if (o) {
        const recoveryId = `${o.outageId}/recovery`;
        recoveries.push(recoveryId);
        const action = rnd() < 0.5 ? 'report-only' : pick(ACTIONS)!;
        // A departing trainer's decision may wait for its checkpoint, and is decided again when the wait ends.
        const handover = o.planned && rnd() < 0.7 ? { handover: { checkpointStep: 1, by: new Date(T0 + t).toISOString(), status: pick(HANDOVERS)! } } : {};
        return msg('RecoveryDecided', {
          recoveryId,
          verdictId: o.outageId,
          machineId: o.machineId,
          action,
          rule: 'trainer-fault',
          step: 0,
          evidence: {},
          ...handover,
        });
      }
    }
    if (r < 0.7) {
      const trainers = [...machines].filter(([, role]) => role !== 'rollout').map(([id]) => id);
      return msg('RestartTrainerGroup', {
        ...recoveryCommand(),
        machines: trainers.length ? trainers.filter(() => rnd() < 0.8) : ['nobody'],
        step: 0,
        checkpointStep: null,
        keepBatch: true,
      });
    }
    if (r < 0.715) return msg('RestartRolloutEngine', { ...recoveryCommand(), machineId: someMachine(), attempt: 1, budget: 3 });
    if (r < 0.73) return msg('PromoteRolloutToTrainer', { ...recoveryCommand(), rolloutMachineId: someMachine(), replacesMachineId: someMachine() });
    if (r < 0.77)
      return msg('ReplaceMachine', {
        ...recoveryCommand(),
        machineId: someMachine(),
        role: pick(['trainer', 'rollout', 'hybrid'] as const),
        zone: 'z',
        hardwareClass: 'h',
      });
    if (r < 0.78) return msg('RestartTask', { ...recoveryCommand(), rule: 'escalate-first-iteration' });
    if (r < 0.8)
      return msg('RecoveryCompleted', {
        recoveryId: pick(recoveries) ?? 'x',
        outcome: 'recovered',
        stagesMs: { detect: 1, decide: 2, restart: 3, reconnect: 4 },
      });
    if (r < 0.83) {
      const machineId = someMachine()!;
      const from = machines.get(machineId)!;
      const to = pick(['trainer', 'rollout', 'hybrid'] as const)!;
      machines.set(machineId, to);
      return msg('MachineRoleChanged', { machineId, from, to, reason: 'spec' });
    }
    if (r < 0.85) {
      const machineId = someMachine()!;
      if (rnd() < 0.5) machines.delete(machineId);
      return msg('MachineDeregistered', { machineId, reason: 'spec' });
    }
    if (r < 0.9) return msg('TrainingStepStarted', { step: 1, batchId: 'b', startedAt: new Date(T0 + t).toISOString() });
    if (r < 0.95) return msg('TrainingStepCompleted', { step: 1, batchId: 'b', durationMs: 1 });
    // An event from the past (another topic lagging): it is applied at the clock.
    return msg('RolePhaseChanged', { machineId: someMachine(), role: 'rollout', phase: pick(PHASES), step: 0, changedAt: '' }, Math.max(0, t - 5_000));
  };

  const compare = (i: number, what: string) => {
    const reportNow = (v: EttrView) => ({ effective: v.effectiveGpuMs, total: v.totalGpuMs, buckets: v.buckets, sliding: slidingEttr(v), stages: v.stages });
    const got = { ...reportNow(view), ledger: ledgerByKey(ledgerEntries(view)), outages: view.outages, clock: view.clock };
    const want = {
      ...reportNow(expected as unknown as EttrView),
      ledger: ledgerByKey(Object.values(expected.ledger)),
      outages: expected.outages,
      clock: expected.clock,
    };
    try {
      expect(got).toEqual(want);
      const settled = viewAt(view, view.clock ?? 0);
      expect(Object.fromEntries(Object.entries(settled.machines).map(([id, m]) => [id, facts(m)]))).toEqual(expected.machines);
    } catch (e) {
      mismatches.push(`seed ${seed}, event ${i} (${what}): ${(e as Error).message.slice(0, 2_000)}`);
    }
  };

  view = projection.evolve(view, msg('JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 2, rolloutMachines: 3 }));
  expected = reference.evolve(expected, msg('JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 2, rolloutMachines: 3 }) as never);
  for (let i = 0; i < events && mismatches.length === 0; i++) {
    // Often several events at one instant (a decision and its commands), sometimes a long quiet gap.
    t += rnd() < 0.3 ? 0 : rnd() < 0.9 ? Math.floor(rnd() * 5_000) : Math.floor(rnd() * 600_000);
    const event = next();
    view = projection.evolve(view, event);
    expected = reference.evolve(expected, event as never);
    if (i % 7 === 0 || i === events - 1) compare(i, event.type);
  }
  // Read later than the last event: both accounted up to `now`.
  const now = T0 + t + 90_000;
  const got = viewAt(view, now);
  const want = referenceViewAt(expected, now) as unknown as EttrView;
  try {
    expect(ettrReport(got)).toEqual(ettrReport(want));
    expect(downtimeLedger(got)).toEqual(downtimeLedger(want));
    expect(downtimeLedger(view)).toEqual(downtimeLedger(expected as unknown as EttrView));
  } catch (e) {
    mismatches.push(`seed ${seed}, read at now: ${(e as Error).message.slice(0, 2_000)}`);
  }
  return mismatches;
}

describe('ETTR projection, incremental accounting vs. accounting every machine on every event', () => {
  it.each(Array.from({ length: 40 }, (_, i) => i + 1))('random job %i: the same ETTR, ledger, outages and machines', (seed) => {
    expect(randomJob(seed, 400)).toEqual([]);
  });

  it('a long job with many outages', () => {
    expect(randomJob(1_000, 3_000)).toEqual([]);
  });
});
