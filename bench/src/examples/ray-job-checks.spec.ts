import type { GrpoRecord } from '@robustrl/harness';
import { everyStepTrainedWhole, rayJobChecks, samplesFromMovedVersions, trainersResumeWhatRobustrlNamed } from './ray-job-checks';

/** The Ray example's checks of the job's own ledger: each holds on a clean run and fails on what it names. */
const shape = { steps: 3, batchSize: 2, ranks: 2, maxStaleness: 1 };
const at = 0;
const ids = (step: number) => [`s${step}-a`, `s${step}-b`];

function cleanRun(): GrpoRecord[] {
  const ledger: GrpoRecord[] = [];
  for (let step = 1; step <= 3; step++) {
    for (const id of ids(step)) ledger.push({ kind: 'completed', at, step, trajectoryId: id, versions: [Math.max(0, step - 1)] });
    for (const rank of [0, 1]) ledger.push({ kind: 'trained', at, step, rank, batch: `b${step}`, sampleIds: ids(step), staleIds: [] });
    ledger.push({ kind: 'checkpoint', at, step, digest: { params: `p${step}`, optimizer: `o${step}` } });
  }
  return ledger;
}

describe('the Ray example’s checks', () => {
  it('all hold on a clean run', () => {
    expect(rayJobChecks(shape, cleanRun()).map((c) => [c.ok, c.detail])).toEqual([
      [true, '3 steps × 2 samples (0 left out as beyond the staleness bound)'],
      [true, 'newest version sampled: 2; 0 sample(s) of the first steps untagged (the base model, before its first stamp)'],
      [true, '0 rank resume(s), each equal to its checkpoint'],
      [true, '0 restarted trainer actor(s)'],
    ]);
  });

  it('a step a rank never trained, or trained on part of its batch, fails', () => {
    const missing = cleanRun().filter((r) => !(r.kind === 'trained' && r.step === 2 && r.rank === 1));
    expect(everyStepTrainedWhole(shape, missing)).toMatchObject({ ok: false, detail: 'step 2: not trained by rank(s) 1' });
    const partial = cleanRun().map((r) => (r.kind === 'trained' && r.step === 3 ? { ...r, sampleIds: ['s3-a'] } : r));
    expect(everyStepTrainedWhole(shape, partial).ok).toBe(false);
    // Left out as stale is accounted for: trained and left out make the batch.
    const leftOut = cleanRun().map((r) => (r.kind === 'trained' && r.step === 3 ? { ...r, sampleIds: ['s3-a'], staleIds: ['s3-b'] } : r));
    expect(everyStepTrainedWhole(shape, leftOut).ok).toBe(true);
    // So is a sample left out for having no training sample, and the detail names it.
    const unusable = cleanRun().map((r) => (r.kind === 'trained' && r.step === 3 ? { ...r, sampleIds: ['s3-a'], unusableIds: ['s3-b'] } : r));
    expect(everyStepTrainedWhole(shape, unusable)).toMatchObject({ ok: true, detail: expect.stringContaining('1 as without a training sample') });
    const twice = cleanRun().map((r) => (r.kind === 'trained' && r.step === 3 ? { ...r, unusableIds: ['s3-b'] } : r));
    expect(everyStepTrainedWhole(shape, twice).ok).toBe(false);
  });

  it('a sample beyond the staleness bound, or untagged past the first steps, fails', () => {
    const stale = cleanRun().map((r) => (r.kind === 'completed' && r.trajectoryId === 's3-a' ? { ...r, versions: [0] } : r));
    expect(samplesFromMovedVersions(shape, stale)).toMatchObject({ ok: false, detail: 's3-a (step 3): a token of version 0' });
    const untagged = cleanRun().map((r) => (r.kind === 'completed' && r.trajectoryId === 's3-b' ? { ...r, versions: [] } : r));
    expect(samplesFromMovedVersions(shape, untagged).ok).toBe(false);
  });

  it('a restarted trainer actor that resumed elsewhere than robustrl named fails', () => {
    const actor = (resumeFrom: number, told: number) => ({ kind: 'actor', at, role: 'trainer', machine: 'trainer-1', node: 'n', rank: 3, resumeFrom, told });
    expect(trainersResumeWhatRobustrlNamed([...cleanRun(), actor(2, 2)]).ok).toBe(true);
    expect(trainersResumeWhatRobustrlNamed([...cleanRun(), actor(1, 2)])).toMatchObject({
      ok: false,
      detail: 'rank 3 on trainer-1: resumed from checkpoint 1, robustrl named 2',
    });
  });
});
