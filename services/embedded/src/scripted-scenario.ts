import { createCausedMessage, createMessage, DataOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';

/**
 * A short scripted story of one semi-sync job, told only in events: machines join, a step trains,
 * rollouts generate, a rollout machine reports an ECC error. It exercises every topic of the backbone.
 * The detector/controller rules that turn the ECC signal into a verdict and a replacement are the
 * next issue; until then this story ends at the signal, and the run shows the backbone carrying it.
 *
 * Pure: time comes in as `start`, ids from `ids`, so the same story can be replayed in tests.
 */
export function scriptedScenario(jobId: string, start: Date): RobustrlMessage[] {
  let t = start.getTime();
  const at = (advanceMs = 0) => new Date((t += advanceMs)).toISOString();
  const source = 'scenario';
  const msg = <T extends MessageType>(type: T, data: DataOf<T>, advanceMs = 0) =>
    createMessage(type, data, { jobId, source, occurredAt: at(advanceMs) });

  const story: RobustrlMessage[] = [];
  const started = msg('JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 3 });
  story.push(started);
  story.push(
    msg('MachineRegistered', { machineId: 'trainer-0', role: 'trainer', zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: '10.0.0.10:7070', dpRank: 0, weightsAddress: '10.0.0.10:13337' }, 100),
  );
  for (let i = 0; i < 3; i++) {
    story.push(
      msg('MachineRegistered', { machineId: `rollout-${i}`, role: 'rollout', zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `10.0.0.2${i}:7070`, dpRank: i, weightsAddress: `10.0.0.2${i}:13337` }, 100),
    );
  }
  story.push(msg('TrainingStepStarted', { step: 0, batchId: 'batch-0', startedAt: at() }, 1_000));
  story.push(msg('RolePhaseChanged', { machineId: 'trainer-0', role: 'trainer', phase: 'training', step: 0, changedAt: at() }));
  for (let s = 0; s < 3; s++) {
    story.push(msg('GpuActivitySampled', { machineId: 'trainer-0', sampledAt: at(), intervalSeconds: 10, tensorActive: 0.62 + s * 0.05, source: 'emulated' }, 10_000));
    for (let i = 0; i < 3; i++) {
      story.push(
        msg('RolloutThroughputSampled', {
          machineId: `rollout-${i}`, rolloutId: `rollout-${i}/dp${i}`, sampledAt: at(), windowSeconds: 10,
          tokensPerSecond: 2400 - i * 300, completedRequests: 12 + s, inFlightRequests: 64, awaitingTools: 8,
        }),
      );
    }
  }
  story.push(
    msg('TrajectoryTurnAppended', {
      trajectoryId: 'traj-0-0', batchId: 'batch-0', step: 0, promptId: 'p-0', sampleIndex: 0, turnId: 'traj-0-0/0',
      turnIndex: 0, kind: 'model-output', rolloutId: 'rollout-2/dp2', weightVersion: 0, tokens: 512,
    }),
  );
  story.push(msg('CheckpointSaved', { step: 0, uri: 'file:///ckpt/step-0', blockingMs: 1_800 }, 5_000));
  story.push(msg('TrainingStepCompleted', { step: 0, batchId: 'batch-0', durationMs: 36_000 }));
  story.push(
    msg('WeightVersionPublished', {
      version: 1, step: 0, buckets: [{ index: 0, sizeBytes: 1 << 20, checksum: 'sha256:demo' }], totalBytes: 1 << 20,
      sources: [{ instanceId: 'trainer-0/dp0', address: '10.0.0.10:7071' }],
    }, 500),
  );
  const fault = msg('AgentFaultSignalled', {
    machineId: 'rollout-2', role: 'rollout', signal: 'ecc-error', detail: 'uncorrectable ECC error on GPU 5 (Xid 48)', exitCode: null, observedAt: at(),
  }, 4_000);
  story.push(fault);
  return story;
}

export const SCENARIO_TOPICS = Object.values(Topics);
