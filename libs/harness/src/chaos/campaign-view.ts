import type { MessageOf, RobustrlMessage } from '@robustrl/contracts';

/**
 * What the campaign reads off the events it observed (system-chaos.ts): pure, so that a fault's target
 * and the settle wait are chosen from the same picture the invariants check afterwards.
 */

/** Each machine's current role by the events (null once deregistered). */
export function rolesOf(events: readonly RobustrlMessage[]): Map<string, string | null> {
  const roles = new Map<string, string | null>();
  for (const m of events) {
    if (m.type === 'MachineRegistered') roles.set(m.data.machineId, (m as MessageOf<'MachineRegistered'>).data.role);
    if (m.type === 'MachineRoleChanged') roles.set(m.data.machineId, (m as MessageOf<'MachineRoleChanged'>).data.to);
    if (m.type === 'MachineDeregistered') roles.set(m.data.machineId, null);
  }
  return roles;
}

/** Recoveries decided (other than report-only) and not completed, in the order decided. */
export function openRecoveries(events: readonly RobustrlMessage[]): string[] {
  const open = new Set<string>();
  for (const m of events) {
    if (m.type === 'RecoveryDecided' && (m as MessageOf<'RecoveryDecided'>).data.action !== 'report-only') open.add(m.data.recoveryId);
    if (m.type === 'RecoveryCompleted') open.delete(m.data.recoveryId);
  }
  return [...open];
}

/** Each machine's last reported phase since it (re)started (null: registered or restarted, no phase yet). */
export function phasesOf(events: readonly RobustrlMessage[]): Map<string, string | null> {
  const phase = new Map<string, string | null>();
  for (const m of events) {
    if (m.type === 'MachineRegistered' || m.type === 'RestartRolloutEngine') phase.set(m.data.machineId, null);
    if (m.type === 'RolePhaseChanged') phase.set(m.data.machineId, (m as MessageOf<'RolePhaseChanged'>).data.phase);
  }
  return phase;
}

/** The recovery decided on a fault of `machineId` after `since` (ms), if any: its id and action. */
export function recoveryFor(events: readonly RobustrlMessage[], machineId: string, since: number): MessageOf<'RecoveryDecided'>['data'] | undefined {
  for (const m of events) {
    if (m.type !== 'RecoveryDecided' || Date.parse(m.occurredAt) < since) continue;
    const d = (m as MessageOf<'RecoveryDecided'>).data;
    if (d.machineId === machineId && d.action !== 'report-only') return d;
  }
  return undefined;
}

/** Whether the recovery completed (any outcome). */
export const completedRecovery = (events: readonly RobustrlMessage[], recoveryId: string): boolean =>
  events.some((m) => m.type === 'RecoveryCompleted' && m.data.recoveryId === recoveryId);

/**
 * Why the run has not settled (docs/contributors/chaos.md "The whole system under faults": each fault waits for it), or ''
 * when it has: every service ready, no recovery open, every machine up, a step committed since the last
 * fault (or the job done). Machines down are named, not only counted: a machine killed and not yet
 * found has opened no recovery, and replacements of earlier faults can make up the count.
 */
export function unsettled(view: {
  services: readonly string[];
  readiness: readonly number[];
  open: readonly string[];
  machinesUp: number;
  machines: number;
  /** The job's machines whose processes died and that are neither restarted nor isolated yet. */
  down: readonly string[];
  moved: boolean;
}): string {
  return [
    view.readiness.every((c) => c === 200) ? '' : `services ${view.services.filter((_, i) => view.readiness[i] !== 200).join(', ')} not ready`,
    view.open.length ? `recoveries open: ${view.open.join(', ')}` : '',
    view.machinesUp >= view.machines ? '' : `${view.machinesUp} of ${view.machines} machines up`,
    view.down.length ? `down and not yet recovered: ${view.down.join(', ')}` : '',
    view.moved ? '' : 'no step committed since the last fault',
  ]
    .filter(Boolean)
    .join('; ');
}
