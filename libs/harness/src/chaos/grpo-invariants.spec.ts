import { createMessage } from '@robustrl/contracts';
import type { TrainingSample } from '@robustrl/contracts';
import {
  activityMeasuredNotPushed,
  ettrAgrees,
  GrpoBatch,
  GrpoRecord,
  passRateHolds,
  restartsResumeTheCheckpoint,
  samplesNeitherLostNorDuplicated,
  samplesWithinStaleness,
  stepsTrainedOnRecordedTrajectories,
  versionTagsHold,
} from './grpo-invariants';

/** Each invariant of the real-job campaign, held on a made-up run that keeps it and one that breaks it. */
const shape = { steps: 2, batchSize: 2, maxStaleness: 1, ranks: 2 };
const sample = (versions: number[]): TrainingSample => ({
  promptTokenIds: [1, 2],
  responseTokenIds: versions.map((_, i) => 10 + i),
  logprobs: versions.map(() => -0.5),
  lossMask: versions.map(() => 1 as const),
  versions,
  reward: 1,
  metadata: null,
  exact: true,
});
const batch = (step: number, ids: string[], versions = [step - 1]): GrpoBatch => ({
  step,
  total: ids.length,
  completed: ids.map((id, k) => ({ trajectoryId: id, promptId: `s${step}-p${k}`, sampleIndex: 0, sample: sample(versions) })),
});
const digest = { params: 'p', optimizer: 'o' };
const trained = (step: number, rank: number, ids: string[], batchDigest = `b${step}`): GrpoRecord => ({
  kind: 'trained',
  at: 0,
  step,
  rank,
  sampleIds: ids,
  batch: batchDigest,
});
const goodLedger = (): GrpoRecord[] => [
  trained(1, 0, ['a', 'b']),
  trained(1, 1, ['a', 'b']),
  { kind: 'checkpoint', at: 1, step: 1, digest },
  trained(2, 0, ['c', 'd']),
  trained(2, 1, ['c', 'd']),
  { kind: 'checkpoint', at: 2, step: 2, digest },
  { kind: 'completed', at: 0, trajectoryId: 'a' },
];
const batches = () => [batch(1, ['a', 'b']), batch(2, ['c', 'd'])];

describe('the GRPO campaign invariants', () => {
  it('steps: committed once in order, each on exactly its recorded trajectories', () => {
    expect(stepsTrainedOnRecordedTrajectories(shape, goodLedger(), batches()).ok).toBe(true);
    const extra = goodLedger();
    extra[3] = trained(2, 0, ['c', 'x']);
    const broken = stepsTrainedOnRecordedTrajectories(shape, extra, batches());
    expect(broken.ok).toBe(false);
    expect(broken.detail).toMatch(/step 2: trained 1 trajectory\(ies\) not recorded for it/);
    const twice = [...goodLedger(), { kind: 'checkpoint', at: 3, step: 2, digest }];
    expect(stepsTrainedOnRecordedTrajectories(shape, twice, batches()).detail).toMatch(/step 2 committed twice/);
    const leftOut = goodLedger();
    leftOut[3] = { ...trained(2, 0, ['c']), staleIds: ['d'] };
    leftOut[4] = trained(2, 1, ['c']);
    expect(stepsTrainedOnRecordedTrajectories(shape, leftOut, batches())).toMatchObject({
      ok: true,
      detail: expect.stringContaining('1 left out as beyond the staleness bound'),
    });
    const ranksDiffer = goodLedger();
    ranksDiffer[1] = trained(1, 1, ['a', 'b'], 'other');
    expect(stepsTrainedOnRecordedTrajectories(shape, ranksDiffer, batches()).detail).toMatch(/ranks trained on different batches/);
  });

  it('samples: one completed per (prompt, sample), each completed once by the loops', () => {
    expect(samplesNeitherLostNorDuplicated(shape, goodLedger(), batches()).ok).toBe(true);
    const lost = [batch(1, ['a']), batch(2, ['c', 'd'])];
    expect(samplesNeitherLostNorDuplicated(shape, goodLedger(), lost).detail).toMatch(/step-1: 1 of 2 samples completed/);
    const twice = [...goodLedger(), { kind: 'completed', at: 1, trajectoryId: 'a' }];
    expect(samplesNeitherLostNorDuplicated(shape, twice, batches()).detail).toMatch(/a completed 2 times/);
  });

  it('restarts: every resumed digest equals its checkpoint', () => {
    const ok = [...goodLedger(), { kind: 'resumed', at: 3, step: 2, rank: 1, digest }];
    expect(restartsResumeTheCheckpoint(ok).ok).toBe(true);
    const bad = [...goodLedger(), { kind: 'resumed', at: 3, step: 2, rank: 1, digest: { params: 'p', optimizer: 'other' } }];
    expect(restartsResumeTheCheckpoint(bad).detail).toMatch(/rank 1 resumed step 2 with the optimizer state other than saved/);
  });

  it('staleness: no trained token older than the bound', () => {
    expect(samplesWithinStaleness(shape, batches(), goodLedger()).ok).toBe(true);
    const trainedStale = [trained(3, 0, ['e'])];
    expect(samplesWithinStaleness(shape, [batch(3, ['e'], [0])], trainedStale).detail).toMatch(/a token of version 0, 2 behind/);
    // Left out by the trainer's fetch: not trained, not a violation.
    expect(samplesWithinStaleness(shape, [batch(3, ['e'], [0])], [trained(3, 0, [])]).ok).toBe(true);
  });

  it('version tags: within the tolerance, and enough tokens that tell versions apart', () => {
    const report = {
      tolerance: 1e-3,
      samples: 4,
      tokens: 40,
      max_diff: 1e-6,
      mean_diff: 1e-7,
      mismatched: [],
      missing_versions: [],
      neighbour_tokens: 40,
      discriminating: 20,
    };
    expect(versionTagsHold(report).ok).toBe(true);
    expect(versionTagsHold({ ...report, mismatched: ['t@1: 0.2 under version 3'] }).ok).toBe(false);
    expect(versionTagsHold({ ...report, discriminating: 2 }).detail).toMatch(/too few to trust the check/);
    expect(versionTagsHold({ error: 'verify-versions exited 1' }).ok).toBe(false);
  });

  it('activity: measured (process-cpu), and it moves', () => {
    const at = { jobId: 'j', source: 'agent', occurredAt: '2026-11-26T00:00:00.000Z' };
    const gpu = (machineId: string, tensorActive: number, source: 'process-cpu' | 'emulated' = 'process-cpu') =>
      createMessage('GpuActivitySampled', { machineId, sampledAt: at.occurredAt, intervalSeconds: 1, tensorActive, source }, at);
    expect(activityMeasuredNotPushed([gpu('trainer-0', 0.9), gpu('trainer-0', 0)], ['trainer-0']).ok).toBe(true);
    expect(activityMeasuredNotPushed([gpu('trainer-0', 0.9, 'emulated'), gpu('trainer-0', 0.9, 'emulated')], ['trainer-0']).detail).toMatch(
      /expected process-cpu only.*never read idle/,
    );
  });

  it('pass rate: within the tolerance of the fault-free run, or rising without one', () => {
    const evals: GrpoRecord[] = [
      { kind: 'eval', at: 0, step: 0, passRate: 0.6 },
      { kind: 'eval', at: 1, step: 8, passRate: 0.8 },
    ];
    expect(passRateHolds(evals, 0.85, 0.1).ok).toBe(true);
    expect(passRateHolds(evals, 0.95, 0.1).ok).toBe(false);
    expect(passRateHolds(evals, null, 0.1).ok).toBe(true);
    expect(
      passRateHolds(
        [
          { ...evals[1], passRate: 0.5 },
          { ...evals[0], step: 0 },
        ],
        null,
        0.1,
      ).ok,
    ).toBe(false);
  });

  it('ETTR: the reported one within the tolerance of the observed one', () => {
    const observed = { ettr: 0.8, gpuSeconds: 1000, effectiveGpuSeconds: 800 };
    expect(ettrAgrees(0.81, observed, 0.02).ok).toBe(true);
    expect(ettrAgrees(0.852, { ...observed, ettr: 0.4 }, 0.02).ok).toBe(false);
    expect(ettrAgrees(null, observed, 0.02).ok).toBe(false);
  });
});
