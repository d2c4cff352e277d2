import type { MessageOf } from '@robustrl/contracts';

export type MachineCommand = MessageOf<'RestartTrainerGroup' | 'PromoteRolloutToTrainer' | 'RestartRolloutEngine'>;

export interface ThisAgent {
  machineId: string;
  incarnation: string;
  startedAt: number;
  /** How far the controller's clock may be ahead of this machine's (ROBUSTRL_COMMAND_CLOCK_SKEW_SECONDS). */
  clockSkewMs: number;
}

/**
 * Why a command addressed to this machine is not for this process, or null when it is: it names
 * another incarnation, or — naming none (a controller that did not know the registration yet) — it
 * was issued before this process started (a replay of the control topic after a restart).
 */
export function staleness(m: MachineCommand, me: ThisAgent): string | null {
  const addressed = m.type === 'RestartTrainerGroup' ? m.data.incarnations?.[me.machineId] : m.data.incarnation;
  if (addressed !== undefined) return addressed === me.incarnation ? null : `issued for incarnation ${addressed}, this is ${me.incarnation}`;
  const issuedAt = Date.parse(m.occurredAt);
  return issuedAt < me.startedAt - me.clockSkewMs ? `issued at ${m.occurredAt}, before this agent started (${new Date(me.startedAt).toISOString()})` : null;
}
