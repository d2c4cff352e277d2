import { DeciderRun } from '@robustrl/domain-kit';
import { Draft } from '@robustrl/contracts';
import { at, published, timeline } from '@robustrl/testing/job-timeline';
import { PUBLICATION_GRACE_MS } from './publication-authority';
import { WeightRegistryDecider } from './weight-registry.decider';
import { WeightRegistryInput } from './weight-registry.state';

/**
 * Authority follows the roster (docs/operators/security.md "Who speaks on the bus"): a weight version goes live only when the registry's
 * roster says its publisher is one of the job's trainers. A publication read before the roster caught up
 * (another topic) waits for it; one whose publisher is not a trainer once the grace ran out is refused.
 */
const msg = timeline('job-authority');
const register = (machineId: string, role: 'rollout' | 'trainer', s = 0) =>
  msg(s, 'MachineRegistered', {
    machineId,
    role,
    zone: 'az-1',
    hardwareClass: 'h100x8',
    gpus: 8,
    agentAddress: `http://${machineId}:8090`,
    dpRank: 0,
    weightsAddress: `${machineId}:9000`,
  });
const publish = (s: number, version: number, publisher: string, trainerEpoch?: number) =>
  msg(s, 'WeightVersionPublished', {
    version,
    step: version,
    buckets: [{ index: 0, sizeBytes: 1_000, checksum: `v${version}-${publisher}` }],
    totalBytes: 1_000,
    sources: [{ instanceId: publisher, address: `${publisher}:7000` }],
    ...(trainerEpoch === undefined ? {} : { trainerEpoch }),
  });
const groupRestart = (s: number, machines: string[], trainerEpoch: number) =>
  msg(s, 'RestartTrainerGroup', {
    recoveryId: `g${trainerEpoch}/recovery`,
    commandId: `g${trainerEpoch}/recovery/1`,
    machines,
    step: 3,
    checkpointStep: 2,
    keepBatch: true,
    trainerEpoch,
  });
const grace = PUBLICATION_GRACE_MS / 1000;

function run(given: WeightRegistryInput[]) {
  const r = DeciderRun.for(WeightRegistryDecider, published('job-authority')).given();
  for (const m of given) r.send({ kind: 'observe', message: m, now: Date.parse(m.occurredAt) });
  return r;
}
const send = (r: ReturnType<typeof run>, m: WeightRegistryInput): Draft[] => r.send({ kind: 'observe', message: m, now: Date.parse(m.occurredAt) });
const pullsOf = (ds: Draft[]) => ds.filter((d) => d.type === 'WeightPullAssigned').map((d) => (d.data as { version: number; sourceId: string }).version);

describe('weight registry: only the roster’s trainers publish versions', () => {
  it("a rollout machine's higher version is held, never pulled, and refused with its reason once the grace ran out", () => {
    const r = run([register('trainer-0', 'trainer'), register('r-0', 'rollout'), register('r-1', 'rollout'), publish(1, 1, 'trainer-0')]);
    expect(Object.keys(r.state.pulls)).toHaveLength(1);
    const rogue = publish(2, 9, 'r-1');
    expect(send(r, rogue)).toEqual([]);
    expect(r.state.versions[9]).toBeUndefined();
    expect(Object.keys(r.state.pendingPublications)).toEqual([rogue.eventId]);
    expect(r.tick(at(2 + grace - 1))).toEqual([]);
    expect(r.tick(at(2 + grace))).toEqual([
      {
        type: 'WeightPublicationRefused',
        data: {
          publicationId: rogue.eventId,
          version: 9,
          publishers: ['r-1'],
          reason: "not published by one of the job's trainers: r-1 is a rollout, not one of the job's trainers",
        },
      },
    ]);
    expect(r.state.pendingPublications).toEqual({});
    // The trainer's version goes on being pulled; nothing was ever assigned of version 9.
    const p = Object.values(r.state.pulls)[0];
    const next = send(r, msg(2 + grace + 1, 'WeightPullCompleted', { ...p, bytes: 1_000, durationMs: 5 }));
    expect(pullsOf(r.emitted.map((e) => e.output))).not.toContain(9);
    expect(pullsOf(next)).toEqual([1]);
    // Redelivered, it is held again and refused again: never live.
    send(r, rogue);
    expect(r.state.versions[9]).toBeUndefined();
  });

  it("a trainer's publication read before its registration (another topic) goes live when the registration arrives", () => {
    const r = run([register('r-0', 'rollout')]);
    expect(send(r, publish(1, 1, 'trainer-0'))).toEqual([]);
    expect(pullsOf(send(r, register('trainer-0', 'trainer', 0)))).toEqual([1]);
    expect(r.state.versions[1]?.status).toBe('live');
    expect(r.state.pendingPublications).toEqual({});
  });

  it("a warm standby's publication read before its promotion goes live with the promotion", () => {
    const r = run([register('trainer-0', 'trainer'), register('r-0', 'rollout'), register('r-1', 'rollout')]);
    expect(send(r, publish(5, 3, 'r-1/rank1'))).toEqual([]);
    const lent = msg(4, 'PromoteRolloutToTrainer', {
      recoveryId: 'x/recovery',
      commandId: 'x/recovery/1',
      rolloutMachineId: 'r-1',
      replacesMachineId: 'trainer-0',
    });
    expect(pullsOf(send(r, lent))).toEqual([3]);
    expect(r.state.versions[3]?.shards[0]?.sources).toEqual([{ instanceId: 'r-1/rank1', address: 'r-1/rank1:7000' }]);
  });

  it('a machine that left the job, or one it never had, is refused; the record of a version it published before, redelivered, is not held', () => {
    const first = publish(1, 1, 'trainer-0');
    const r = run([register('trainer-0', 'trainer'), register('r-0', 'rollout'), first]);
    send(r, msg(2, 'MachineDeregistered', { machineId: 'trainer-0', reason: 'isolated' }));
    // The live version's record again (redelivered): it stays as it was, nothing held.
    expect(send(r, first)).toEqual([]);
    expect(r.state.pendingPublications).toEqual({});
    send(r, publish(3, 2, 'trainer-0'));
    send(r, publish(3, 4, 'stranger'));
    const refused = r.tick(at(3 + grace)).map((d) => (d.data as { reason: string }).reason);
    expect(refused).toEqual([
      "not published by one of the job's trainers: trainer-0 is no longer in the job (left the job: isolated)",
      "not published by one of the job's trainers: stranger is not a machine of this job",
    ]);
    expect(r.state.versions[1]?.shards[0]?.publicationId).toBe(first.eventId);
    expect(r.state.versions[2]).toBeUndefined();
  });
});

/**
 * Fencing (docs/contributors/recovery.md "Fencing"): a trainer that a newer group replaced — cut off from the broker and back, a
 * process that outlived its restart — publishes at the epoch it was started at, which the registry
 * refuses once it knows of a newer group, whatever the roster says of its machine.
 */
describe('weight registry: publications of a replaced trainer group are fenced by its epoch', () => {
  it('after a group restart at epoch 1, a publication of epoch 0 is refused at once with its reason; epoch 1 goes live', () => {
    const r = run([register('trainer-0', 'trainer'), register('trainer-1', 'trainer'), register('r-0', 'rollout'), publish(1, 1, 'trainer-0', 0)]);
    expect(r.state.versions[1]?.status).toBe('live');
    send(r, groupRestart(10, ['trainer-1'], 1));
    const stale = publish(11, 2, 'trainer-0', 0);
    const refused = send(r, stale);
    expect(refused).toEqual([
      {
        type: 'WeightPublicationRefused',
        data: {
          publicationId: stale.eventId,
          version: 2,
          publishers: ['trainer-0'],
          reason: "not published by the job's current trainers: its trainer epoch 0 is stale: the trainer group was formed again at epoch 1",
        },
      },
    ]);
    expect(r.state.versions[2]).toBeUndefined();
    send(r, publish(12, 2, 'trainer-1', 1));
    expect(r.state.versions[2]?.status).toBe('live');
    expect(r.state.versions[2]?.shards[0]?.sources[0]?.instanceId).toBe('trainer-1');
  });

  it("a newer group's publication read before the restart command (another topic) raises the fence itself", () => {
    const r = run([register('trainer-0', 'trainer'), register('trainer-1', 'trainer'), register('r-0', 'rollout')]);
    send(r, publish(5, 3, 'trainer-1', 2));
    const stale = publish(6, 3, 'trainer-0', 1);
    expect(send(r, stale).map((d) => d.type)).toEqual(['WeightPublicationRefused']);
    expect(r.state.versions[3]?.shards[0]?.sources[0]?.instanceId).toBe('trainer-1');
  });

  it("a restarted task's JobStarted carries its epoch: the first group of the old task is fenced; a publication naming no epoch is not", () => {
    const r = run([register('trainer-0', 'trainer'), register('r-0', 'rollout')]);
    send(r, msg(20, 'JobStarted', { mode: 'semi-sync', resumedFromStep: 4, trainerMachines: 1, rolloutMachines: 1, trainerEpoch: 3 }));
    expect(send(r, publish(21, 5, 'trainer-0', 0)).map((d) => d.type)).toEqual(['WeightPublicationRefused']);
    expect(pullsOf(send(r, publish(22, 5, 'trainer-0')))).toEqual([5]);
  });

  it('a held publication (its publisher not yet a trainer) is refused once a newer group fences it, without waiting out the grace', () => {
    const r = run([register('trainer-0', 'trainer'), register('r-0', 'rollout')]);
    const early = publish(5, 3, 'trainer-9', 0);
    expect(send(r, early)).toEqual([]);
    expect(send(r, groupRestart(6, ['trainer-0'], 1)).map((d) => d.type)).toEqual(['WeightPublicationRefused']);
    expect(r.state.pendingPublications).toEqual({});
  });
});
