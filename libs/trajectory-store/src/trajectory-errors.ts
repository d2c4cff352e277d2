import { TrajectoryStatus } from '@robustrl/contracts';
import { RobustrlError } from '@robustrl/bus';

export class TrajectoryNotFoundError extends RobustrlError {
  constructor(readonly trajectoryId: string) {
    super(`trajectory '${trajectoryId}' is not stored`);
  }
}

export class InvalidTransitionError extends RobustrlError {
  constructor(
    readonly trajectoryId: string,
    readonly from: TrajectoryStatus,
    readonly to: TrajectoryStatus,
  ) {
    super(`trajectory '${trajectoryId}' cannot go from ${from} to ${to}`);
  }
}

/** Completed and aborted are final: a trainer may already have consumed a completed trajectory. */
export const TRANSITIONS: Record<TrajectoryStatus, readonly TrajectoryStatus[]> = {
  'in-flight': ['completed', 'reassigned', 'aborted'],
  reassigned: ['in-flight', 'completed', 'reassigned', 'aborted'],
  completed: [],
  aborted: [],
};
