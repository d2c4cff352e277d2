import type { MessageOf } from '@robustrl/contracts';
import type { FaultHost, Injection } from './fault-host';
import { runningMachines } from './fault-host';
import type { ScheduledFault } from './fault-schedule';
import { pickOf } from './fault-schedule';

/**
 * The planned failures of the campaign (docs/planned-failures.md): a machine that announces its
 * departure and then goes, whatever the control plane did meanwhile.
 *
 * - `drain-*-machine`: SIGTERM to the machine's agent alone, as the kubelet signals an evicted pod's
 *   main process; the agents run with the pod's grace period (`ROBUSTRL_AGENT_TERMINATION_GRACE_SECONDS`,
 *   campaign-env.ts), and the machine is killed when it ends, as the kubelet's SIGKILL would.
 * - `preempt-*-machine`: a cloud's preemption notice, reported through the agent's API with its
 *   deadline (`node-draining`, `departsInSeconds`), and the machine killed at the deadline.
 *
 * Compared in the scorecard with `kill-*-machine`, the same machine lost without a word (class-scorecard.ts).
 */
export const PLANNED_FAULTS = ['drain-trainer-machine', 'drain-rollout-machine', 'preempt-trainer-machine', 'preempt-rollout-machine'] as const;
export type PlannedFault = (typeof PLANNED_FAULTS)[number];
export const isPlanned = (kind: string): kind is PlannedFault => (PLANNED_FAULTS as readonly string[]).includes(kind);

/** The pod's termination grace period the campaign's agents are given when its mix has planned faults: Kubernetes' default. */
export const DRAIN_GRACE_SECONDS = 30;
/** How long a preemption notice gives: Compute Engine's. */
export const PREEMPT_NOTICE_SECONDS = 30;

export async function plannedFault(host: FaultHost, fault: ScheduledFault & { kind: PlannedFault }): Promise<Injection> {
  const role = fault.kind.includes('trainer') ? 'trainer' : 'rollout';
  const target = pickOf(runningMachines(host, role), fault.pick);
  if (!target) return { target: 'none', note: `no running ${role} machine` };
  const pid = host.supervisor.pidOf(target);
  if (pid === undefined) return { target: 'none', note: `${target} has no agent process` };
  let seconds: number;
  if (fault.kind.startsWith('drain')) {
    seconds = DRAIN_GRACE_SECONDS;
    process.kill(pid, 'SIGTERM');
  } else {
    seconds = PREEMPT_NOTICE_SECONDS;
    const address = agentAddressOf(host, target);
    if (!address) return { target: 'none', note: `${target} registered no agent address` };
    const res = await fetch(`${address}/v1/errors`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ signal: 'node-draining', detail: 'chaos: preemption notice', departsInSeconds: seconds }),
    }).catch((err: unknown) => ({ ok: false, status: String(err) }));
    if (!res.ok) return { target: 'none', note: `${target}'s agent refused the notice (${res.status})` };
  }
  // The machine goes at its deadline, moved or not; an agent that stopped by itself before is gone already.
  const deadline = setTimeout(() => {
    try {
      if (host.supervisor.pidOf(target) === pid) host.supervisor.killMachine(target, 'SIGKILL');
    } catch {
      // The run ended and its supervisor with it: nothing is left to kill.
    }
  }, seconds * 1000);
  deadline.unref();
  return { target, note: `${fault.kind.startsWith('drain') ? 'SIGTERM to its agent' : 'preemption notice'}, gone in ${seconds} s` };
}

function agentAddressOf(host: FaultHost, machineId: string): string | undefined {
  let address: string | undefined;
  for (const m of host.events())
    if (m.type === 'MachineRegistered' && (m as MessageOf<'MachineRegistered'>).data.machineId === machineId)
      address = (m as MessageOf<'MachineRegistered'>).data.agentAddress;
  return address;
}
