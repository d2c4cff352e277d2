import type { DataOf } from '@robustrl/contracts';
import type { RoleExit } from './role-process';

/** What the agent reports of a fault it saw itself (paper §4.1: explicit signals confirm at once). */
export function faultSignal(
  machineId: string,
  role: DataOf<'AgentFaultSignalled'>['role'],
  signal: DataOf<'AgentFaultSignalled'>['signal'],
  detail: string,
  exitCode: number | null = null,
): DataOf<'AgentFaultSignalled'> {
  return { machineId, role, signal, detail, exitCode, observedAt: new Date().toISOString() };
}

/** A process's exit as the shell writes it: its code, or 128 + the number of the signal that killed it. */
export function exitCodeOf(exit: Pick<RoleExit, 'code' | 'signal'>): number | null {
  return exit.code ?? (exit.signal ? 128 + signalNumber(exit.signal) : null);
}

function signalNumber(signal: NodeJS.Signals): number {
  const numbers: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGTERM: 15 };
  return numbers[signal] ?? 0;
}
