import type { Evidence } from '@robustrl/contracts';
import type { ResolvedDetectionSettings } from '../detection-settings';
import type { WatchedMachine } from './detection-rule';

/**
 * A machine of a restarted task that never registers again (docs/contributors/detection.md): every machine is left
 * alone while the task restarts (`restarting`: silence while a process starts says nothing), but one
 * lost just then — killed as its agent came back, its node gone — would otherwise be waited for
 * forever, the rest of its group blocked on it. After `REJOIN_WINDOWS` agent-silent windows without a
 * registration it is confirmed faulty, as a machine: the controller's rules decide what follows.
 */
export const NOT_BACK_AFTER_RESTART = 'not-back-after-task-restart';

/** Windows a restarting machine has to register again: a loaded host's whole job takes tens of seconds. */
export const REJOIN_WINDOWS = 5;

export const rejoinDeadline = (machine: WatchedMachine, settings: Pick<ResolvedDetectionSettings, 'agentSilentWindowMs'>): number | null =>
  machine.status === 'restarting' ? machine.watchedSince + REJOIN_WINDOWS * settings.agentSilentWindowMs : null;

/** The finding on a restarting machine at `now`: its deadline passed without a registration, or null. */
export function notBackFinding(
  machine: WatchedMachine,
  now: number,
  settings: Pick<ResolvedDetectionSettings, 'agentSilentWindowMs'>,
): { since: number; evidence: Evidence } | null {
  const deadline = rejoinDeadline(machine, settings);
  if (deadline === null || now < deadline) return null;
  const since = new Date(machine.watchedSince).toISOString();
  return {
    since: machine.watchedSince,
    evidence: {
      windowSeconds: (deadline - machine.watchedSince) / 1000,
      faultEvidenceSince: since,
      detail: `not registered again ${Math.round((now - machine.watchedSince) / 1000)} s after its task restarted`,
    },
  };
}
