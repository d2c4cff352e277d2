import type { DataOf } from '@robustrl/contracts';

/** The detector's rule for a machine whose agent stopped reporting and did not answer its probe, whatever its role. */
export const LIVENESS_RULE = 'agent-silent';

/**
 * Whether a verdict says the machine itself is gone (its hardware failed, or its agent is unreachable), so
 * that a command waiting on it will never be answered (paper Fig. 7). A trainer verdict with hardware or
 * liveness evidence; for a rollout only the liveness rule: a rollout lent as warm standby goes quiet as a
 * rollout by design while it is promoted (verdictForFormerRole), so its rollout rules say nothing about its agent.
 */
export function verdictMeansMachineGone(verdict: Pick<DataOf<'FaultConfirmed'>, 'machineFaulty' | 'handledAs' | 'rule'>): boolean {
  return verdict.machineFaulty && (verdict.handledAs === 'trainer' || verdict.rule === LIVENESS_RULE);
}

/**
 * Whether a verdict on a machine fails a command that waits on it. A trainer restart: when the machine is
 * gone. A promotion to warm standby: any verdict with machine evidence — a healthy promotion is answered
 * within seconds, long before a rollout rule's window and probe can run out, so a standby still
 * unanswered by then is not coming.
 */
export function verdictFailsCommand(
  verdict: Pick<DataOf<'FaultConfirmed'>, 'machineFaulty' | 'handledAs' | 'rule'>,
  command: 'RestartTrainerGroup' | 'PromoteRolloutToTrainer',
): boolean {
  return command === 'PromoteRolloutToTrainer' ? verdict.machineFaulty : verdictMeansMachineGone(verdict);
}
