import { MessageBus } from '@robustrl/bus';
import { createMessage } from '@robustrl/contracts';
import { EngineView } from './engine-pool';
import { RouterLogger } from './router-reporting';
import { TrajectoryIdentity } from './trajectory-identity';

/**
 * Failover's events (paper §5.2.2): a recorded trajectory moved off a failed engine is announced as
 * TrajectoriesReassigned (from, to, the turn it resumes from) and TrajectoryStatusChanged 'reassigned',
 * so the rest of the control plane sees the move without asking the router.
 */
export class ReassignmentEvents {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly bus: MessageBus | undefined,
    private readonly source: string,
    private readonly log: RouterLogger,
    private readonly now?: () => Date,
  ) {}

  /** `resumeFromTurn`: the index the interrupted answer will have in the trajectory. */
  reassigned(identity: TrajectoryIdentity, resumeFromTurn: number, from: EngineView, to: EngineView, reason: string): void {
    const bus = this.bus;
    if (!bus) return;
    const occurredAt = (this.now?.() ?? new Date()).toISOString();
    const envelope = { jobId: identity.jobId, source: this.source, occurredAt };
    const reassignedEvent = createMessage(
      'TrajectoriesReassigned',
      {
        fromRolloutId: from.id,
        reason: reason.slice(0, 1000) || 'engine failed',
        assignments: [{ trajectoryId: identity.trajectoryId, toRolloutId: to.id, resumeFromTurn }],
      },
      envelope,
    );
    const statusEvent = createMessage(
      'TrajectoryStatusChanged',
      {
        trajectoryId: identity.trajectoryId,
        batchId: identity.batchId,
        step: identity.step,
        promptId: identity.promptId,
        sampleIndex: identity.sampleIndex,
        status: 'reassigned',
      },
      { ...envelope, causationId: reassignedEvent.eventId, correlationId: reassignedEvent.correlationId },
    );
    // Off the request path: a slow or unreachable broker must not stall the caller's stream.
    const p = bus
      .publish([reassignedEvent, statusEvent])
      .catch((err: unknown) => this.log.error('publishing a reassignment failed', { trajectoryId: identity.trajectoryId, error: String(err) }))
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Resolves when every event published so far is on the bus. */
  async flush(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}
