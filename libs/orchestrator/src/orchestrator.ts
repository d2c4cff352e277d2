import type { Role } from '@robustrl/contracts';
import { RobustrlError } from '@robustrl/bus';

/**
 * The orchestrator port: what the controller's recovery executor (the paper's TaskRunner) asks of the
 * platform that runs the job's machines. Three adapters implement it:
 *
 *  - `LocalProcessSupervisor` (./local): a "machine" is a process tree on this host; used by tests
 *    and the demo.
 *  - `HttpOrchestrator` (./http): any orchestrator served over HTTP by a machine host that outlives
 *    its callers (`serveOrchestrator`), e.g. a local process supervisor in its own process.
 *  - `KubernetesOrchestrator` (./kubernetes): a machine is a pod labelled with the job, role, zone
 *    and hardware class; the pod name is the machine id; isolating it cordons its node; scaling a
 *    pool up or down changes the replicas of the pods' StatefulSet or Deployment.
 *
 * In-place restarts of a role process (the fast path of paper §5.1.2) are done by the agent on that
 * machine, not here: the port is for what an agent cannot do for itself (a dead machine, a new
 * machine, the whole task) and for elastic pools (the paper's ElasticRayWorkerGroup): a new machine
 * without a failed one (`requestMachine` without `replaces`) and giving back a healthy one
 * (`releaseMachine`).
 *
 * Every operation carries an `operationId` (the recovery command id). Adapters make operations
 * idempotent per id: a redelivered command whose operation already ran returns the first result
 * instead of acting twice — that is what keeps a controller killed mid-recovery from restarting twice.
 */
export interface MachineSpec {
  machineId: string;
  role: Role;
  zone: string;
  hardwareClass: string;
}

export interface Orchestrator {
  readonly kind: 'local' | 'kubernetes' | 'http';

  /** Machines this orchestrator knows for the job (running or starting), e.g. to reconcile after a restart. */
  listMachines(jobId: string): Promise<MachineSpec[]>;

  /**
   * Stop everything on a machine and keep new work off it (Kubernetes: cordon the node, delete the
   * pod). Idempotent: isolating an isolated or vanished machine succeeds.
   */
  isolateMachine(request: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<void>;

  /**
   * Ask for a new machine for a role, in the given zone and hardware class. With `replaces`, it is the
   * replacement of an isolated machine (Kubernetes: the owner's recreation of the deleted pod).
   * Without it, it is a scale-up: one machine more than before (Kubernetes: the owner's replicas + 1;
   * a role of bare pods, which nothing can scale, is a non-retriable error). Resolves once the
   * machine exists and runs (its agent registers on its own).
   */
  requestMachine(request: { operationId: string; jobId: string; role: Role; zone: string; hardwareClass: string; replaces?: string }): Promise<MachineSpec>;

  /**
   * Give back a healthy machine: a scale-down by one. The machine is stopped gracefully (its processes
   * get SIGTERM and a grace period, so a rollout engine can drain), is not replaced, and its node is
   * not cordoned. Resolves with the id of the machine that actually left, once it is gone: usually
   * `machineId`, but a StatefulSet can only remove its highest ordinal, so there the released
   * machine is that one, whichever `machineId` named (the caller must drop the returned id from its
   * pool, not the requested one). Idempotent: releasing a vanished, released or isolated machine
   * succeeds, acts on nothing, and returns `machineId`.
   */
  releaseMachine(request: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<string>;

  /** Restart the role processes of the given machines from the outside (when their agent cannot). */
  restartMachines(request: { operationId: string; jobId: string; machineIds: string[] }): Promise<void>;

  /**
   * Restart every machine of the job: the escalation of paper §5.1.2. Each comes back with the role it
   * was launched with (a warm standby's promotion does not outlive it), and a role left short of its
   * launch count (trainers isolated after faults) gets new machines, as a StatefulSet recreates its pods.
   */
  restartTask(request: { operationId: string; jobId: string }): Promise<void>;

  close(): Promise<void>;
}

/** An orchestrator failure, with kafkajs's line between "try again" (`retriable`) and "give up" (libs/bus/src/errors.ts). */
export class OrchestratorError extends RobustrlError {
  constructor(message: string, retriable: boolean, options?: { cause?: unknown }) {
    super(message, { ...options, retriable });
  }
}
