import { TrajectoryStatus } from '@robustrl/contracts';

export class TrajectoryNotFoundError extends Error {
  constructor(readonly trajectoryId: string) {
    super(`trajectory '${trajectoryId}' is not stored`);
    this.name = 'TrajectoryNotFoundError';
  }
}

export class InvalidTransitionError extends Error {
  constructor(
    readonly trajectoryId: string,
    readonly from: TrajectoryStatus,
    readonly to: TrajectoryStatus,
  ) {
    super(`trajectory '${trajectoryId}' cannot go from ${from} to ${to}`);
    this.name = 'InvalidTransitionError';
  }
}

/** Completed and aborted are final: a trainer may already have consumed a completed trajectory. */
export const TRANSITIONS: Record<TrajectoryStatus, readonly TrajectoryStatus[]> = {
  'in-flight': ['completed', 'reassigned', 'aborted'],
  reassigned: ['in-flight', 'completed', 'reassigned', 'aborted'],
  completed: [],
  aborted: [],
};
