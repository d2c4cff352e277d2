/**
 * The local adapter of the orchestrator port, for tests, the demo and single-host use.
 *
 * Mapping (also in libs/orchestrator/README.md, "Local process supervisor"):
 *
 *  - A machine is one process tree on this host: the process that `launch` describes (in the
 *    end-to-end tests an agent, which spawns the role process as its child) and its descendants.
 *  - Each machine is spawned with `detached: true`, so it leads its own process group (and
 *    session); every signal goes to the whole group (`process.kill(-pgid, …)`). A descendant that
 *    starts its own group or session escapes that and is not stopped — the agent must keep its role
 *    process in its group.
 *  - Stopping is SIGTERM (plus SIGCONT, so a group frozen with SIGSTOP can act on it), then SIGKILL
 *    after `stopGraceMs`. Isolating is SIGKILL at once: the machine is suspect, there is nothing to
 *    save. Releasing (a scale-down) is a graceful stop: the machine is healthy and may drain. A machine counts as stopped once its leader has exited and no live (non-zombie) process is
 *    left in its group.
 *  - Nothing is relaunched on its own: a machine whose process dies stays "exited" until the control
 *    plane restarts it, isolates it or asks for a replacement — noticing is the control plane's job.
 *    An isolated or released machine is never relaunched, and its id is never reused.
 *  - Idempotency per operationId is in memory: a repeated id returns the first result without acting
 *    again; concurrent duplicates share the first call. A failed operation is not remembered as done.
 *  - Machines never outlive the supervisor: `close()` stops them, the host process's `exit` event
 *    SIGKILLs what is left synchronously, and a watchdog process SIGKILLs it when the host dies
 *    without an `exit` event (SIGKILL, an unhandled signal, or jest, whose sandboxed `process` never
 *    sees the real process's `exit`).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import type { Role } from '@robustrl/contracts';
import { MachineSpec, Orchestrator, OrchestratorError } from '../orchestrator';
import { OperationKind, OperationMemo } from '../operation-memo';
import {
  Incarnation,
  LocalLaunchCommand,
  LocalMachineExit,
  LocalMachineSnapshot,
  LocalProcessSupervisorOptions,
  MachineRecord,
  signalGroup,
  statusOf,
} from './local-machine';
import { groupHasLiveMembers, OrphanGuard } from './process-groups';

export type {
  LocalLaunchCommand,
  LocalMachineExit,
  LocalMachineLaunch,
  LocalMachineSnapshot,
  LocalMachineStatus,
  LocalProcessSupervisorOptions,
} from './local-machine';

const DEFAULT_STOP_GRACE_MS = 5_000;
/** After SIGKILL only a process stuck in the kernel (uninterruptible sleep) is still there; give up on it then. */
const KILL_WAIT_MS = 5_000;
const GROUP_POLL_MS = 25;
/** A machineIdFor that keeps answering ids in use would otherwise loop forever. */
const MAX_ID_ATTEMPTS = 10_000;

export class LocalProcessSupervisor implements Orchestrator {
  readonly kind = 'local' as const;
  private readonly launch: LocalProcessSupervisorOptions['launch'];
  private readonly stopGraceMs: number;
  private readonly output: (machineId: string, line: string) => void;
  private readonly machineIdFor: (role: Role, sequence: number) => string;
  private readonly records = new Map<string, MachineRecord>();
  private readonly nextSequence = new Map<Role, number>();
  /** Each job's machines per role at its launch: what a task restart restores (a StatefulSet's replicas). */
  private readonly shapes = new Map<string, MachineSpec[]>();
  private readonly operations = new OperationMemo();
  private readonly orphanGuard = new OrphanGuard();
  private closing?: Promise<void>;

  constructor(options: LocalProcessSupervisorOptions) {
    this.launch = options.launch;
    this.stopGraceMs = options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    this.output = options.output ?? ((machineId, line) => process.stderr.write(`[${machineId}] ${line}\n`));
    this.machineIdFor = options.machineIdFor ?? ((role, sequence) => `${role}-${sequence}`);
  }

  /** Starts a job's initial machines; resolves once all are spawned. Ids must be new to this supervisor. */
  async launchJob(jobId: string, machines: MachineSpec[]): Promise<void> {
    this.assertOpen();
    const ids = machines.map((machine) => machine.machineId);
    const taken = ids.filter((id, index) => this.records.has(id) || ids.indexOf(id) !== index);
    if (taken.length > 0) {
      throw new OrchestratorError(`launchJob ${jobId}: machine ids already in use: ${[...new Set(taken)].join(', ')}`, false);
    }
    const records = machines.map((spec) => this.createRecord(jobId, spec));
    this.shapes.set(
      jobId,
      machines.map((spec) => ({ ...spec })),
    );
    const results = await Promise.allSettled(records.map((record) => this.startNewMachine(record)));
    throwIfAnyFailed(`launchJob ${jobId}`, results);
  }

  /** Simulates the machine dying (or, with SIGSTOP, hanging): signals its whole group. It is not marked isolated. */
  killMachine(machineId: string, signal: NodeJS.Signals = 'SIGKILL'): void {
    const incarnation = this.recordOf(machineId).current;
    if (incarnation) signalGroup(incarnation, signal);
  }

  /** The leader pid of the machine's latest incarnation. */
  pidOf(machineId: string): number | undefined {
    return this.recordOf(machineId).current?.pid;
  }

  /**
   * Resolves when the machine's current incarnation's leader exits (at once if it has). It follows
   * the incarnation current at the call, not a later restart's.
   */
  async exits(machineId: string): Promise<LocalMachineExit> {
    const incarnation = this.recordOf(machineId).current;
    return incarnation ? incarnation.exited : { code: null, signal: null };
  }

  machines(): LocalMachineSnapshot[] {
    return [...this.records.values()].map((record) => ({
      ...record.spec,
      jobId: record.jobId,
      pid: record.current?.pid,
      status: statusOf(record),
      restarts: record.restarts,
    }));
  }

  /** Every machine of the job that is not isolated or released, including exited ones: they are down, not gone. */
  async listMachines(jobId: string): Promise<MachineSpec[]> {
    this.assertOpen();
    return this.recordsOfJob(jobId).map((record) => ({ ...record.spec }));
  }

  isolateMachine(request: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<void> {
    return this.once(request.operationId, 'isolateMachine', async () => {
      const record = this.records.get(request.machineId);
      // Another job's machine of that id is "vanished" from this job's point of view, never touched;
      // so is a released one, which is stopped already (or stopping gracefully) and never comes back.
      if (!record || record.jobId !== request.jobId || record.retired) return;
      // Marked before anything awaits, so a restart in progress sees it and does not relaunch.
      record.retired = 'isolated';
      const incarnation = record.current;
      if (incarnation) await this.killGroup(record, incarnation);
    });
  }

  /**
   * With or without `replaces` alike, a new machine under a fresh id: here a scale-up and a
   * replacement are the same thing, there being no owner whose replica count would differ.
   */
  requestMachine(request: { operationId: string; jobId: string; role: Role; zone: string; hardwareClass: string; replaces?: string }): Promise<MachineSpec> {
    return this.once(request.operationId, 'requestMachine', async () => {
      const spec: MachineSpec = {
        machineId: this.allocateMachineId(request.role),
        role: request.role,
        zone: request.zone,
        hardwareClass: request.hardwareClass,
      };
      // A scale-up grows the shape a task restart restores; a replacement keeps it.
      if (request.replaces === undefined) this.shapes.get(request.jobId)?.push({ ...spec });
      await this.startNewMachine(this.createRecord(request.jobId, spec));
      return { ...spec };
    });
  }

  /**
   * Stops the machine gracefully (SIGTERM, SIGKILL after the grace) and drops it from the job for
   * good. Always returns `machineId`: a local machine has no ordinal rule that would pick another.
   */
  releaseMachine(request: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<string> {
    return this.once(request.operationId, 'releaseMachine', async () => {
      const record = this.records.get(request.machineId);
      // Vanished, another job's, or already gone (isolated or released): nothing to give back.
      if (!record || record.jobId !== request.jobId || record.retired) return request.machineId;
      // Marked before anything awaits, so a restart in progress sees it and does not relaunch.
      record.retired = 'released';
      // Given back: the job is a machine smaller, and a task restart does not bring it back.
      const shape = this.shapes.get(request.jobId);
      const i = shape?.findIndex((spec) => spec.role === record.spec.role) ?? -1;
      if (i >= 0) shape!.splice(i, 1);
      const incarnation = record.current;
      if (incarnation) await this.stopGroup(record, incarnation);
      return request.machineId;
    });
  }

  restartMachines(request: { operationId: string; jobId: string; machineIds: string[] }): Promise<void> {
    return this.once(request.operationId, 'restartMachines', async () => {
      const ids = [...new Set(request.machineIds)];
      // All checked before any is touched, so a bad id does not leave a half-done restart.
      const problems = ids.flatMap((id) => {
        const record = this.records.get(id);
        if (!record || record.jobId !== request.jobId) return [`unknown machine ${id} in job ${request.jobId}`];
        if (record.retired) return [`machine ${id} is ${record.retired} and is never relaunched`];
        return [];
      });
      if (problems.length > 0) throw new OrchestratorError(`restartMachines: ${problems.join('; ')}`, false);
      await this.restartAll(
        `restartMachines ${ids.join(', ')}`,
        ids.map((id) => this.recordOf(id)),
      );
    });
  }

  /**
   * Every machine of the job restarted with the role it was launched with (a machine lent as warm
   * standby comes back a rollout), and the job's launch shape restored: a role left with fewer machines
   * than it was launched with (trainers isolated after faults) gets new ones — as a Kubernetes job's
   * StatefulSet recreates its trainer pods at full size.
   */
  restartTask(request: { operationId: string; jobId: string }): Promise<void> {
    return this.once(request.operationId, 'restartTask', async () => {
      await this.restartAll(`restartTask ${request.jobId}`, this.recordsOfJob(request.jobId));
      const live = this.recordsOfJob(request.jobId).map((record) => record.spec.role);
      const missing = [...(this.shapes.get(request.jobId) ?? [])];
      for (const role of live) {
        const i = missing.findIndex((spec) => spec.role === role);
        if (i >= 0) missing.splice(i, 1);
      }
      const fresh = missing.map((spec) => this.createRecord(request.jobId, { ...spec, machineId: this.allocateMachineId(spec.role) }));
      throwIfAnyFailed(`restartTask ${request.jobId}`, await Promise.allSettled(fresh.map((record) => this.startNewMachine(record))));
    });
  }

  /** Stops every machine (SIGTERM, then SIGKILL after the grace) and waits for them. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.stopEverything();
    return this.closing;
  }

  private async stopEverything(): Promise<void> {
    const results = await Promise.allSettled([...this.records.values()].map((record) => (record.current ? this.stopGroup(record, record.current) : undefined)));
    throwIfAnyFailed('close', results);
    this.orphanGuard.dispose();
  }

  private async restartAll(what: string, records: MachineRecord[]): Promise<void> {
    const results = await Promise.allSettled(records.map((record) => this.serialize(record, () => this.restart(record))));
    throwIfAnyFailed(what, results);
  }

  private async restart(record: MachineRecord): Promise<void> {
    if (record.current) await this.stopGroup(record, record.current);
    if (record.retired) return;
    await this.startIncarnation(record);
    record.restarts += 1;
  }

  private serialize<T>(record: MachineRecord, run: () => Promise<T>): Promise<T> {
    const result = record.queue.then(run);
    record.queue = result.catch(() => undefined);
    return result;
  }

  private createRecord(jobId: string, spec: MachineSpec): MachineRecord {
    let command: LocalLaunchCommand;
    try {
      command = this.launch({ ...spec, jobId });
    } catch (error) {
      throw new OrchestratorError(`launch of machine ${spec.machineId}: ${messageOf(error)}`, false, { cause: error });
    }
    return {
      spec: { ...spec },
      jobId,
      // Resolved once so a restart runs with the same environment even if ours changed meanwhile.
      command: { command: command.command, args: [...command.args], env: { ...process.env, ...command.env }, cwd: command.cwd },
      restarts: 0,
      queue: Promise.resolve(),
    };
  }

  /** A machine exists once spawned: one that fails to start is forgotten, so a retry is a clean new request. */
  private async startNewMachine(record: MachineRecord): Promise<void> {
    this.records.set(record.spec.machineId, record);
    try {
      await this.startIncarnation(record);
    } catch (error) {
      this.records.delete(record.spec.machineId);
      throw error;
    }
  }

  /** Spawns a new incarnation of the machine; resolves on the 'spawn' event. */
  private startIncarnation(record: MachineRecord): Promise<void> {
    // Checked in the same tick as the spawn, so close() either sees the new incarnation or prevents it.
    this.assertOpen();
    const machineId = record.spec.machineId;
    const { command, args, env, cwd } = record.command;
    let child: ChildProcess;
    try {
      child = spawn(command, args, { env, cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      // Thrown synchronously only for invalid arguments, which a retry would repeat.
      return Promise.reject(new OrchestratorError(`machine ${machineId}: cannot start ${command}: ${messageOf(error)}`, false, { cause: error }));
    }
    let resolveExited!: (exit: LocalMachineExit) => void;
    const incarnation: Incarnation = {
      pid: child.pid,
      exited: new Promise((resolve) => (resolveExited = resolve)),
      groupGone: child.pid === undefined,
    };
    const markExited = (exit: LocalMachineExit) => {
      if (incarnation.exit) return;
      incarnation.exit = exit;
      resolveExited(exit);
      if (incarnation.pid !== undefined && !groupHasLiveMembers(incarnation.pid)) this.markGroupGone(incarnation);
    };
    record.current = incarnation;
    if (incarnation.pid !== undefined) this.orphanGuard.watch(incarnation.pid);
    for (const stream of [child.stdout, child.stderr]) if (stream) this.forwardLines(machineId, stream);
    child.once('exit', (code, signal) => markExited({ code, signal }));
    return new Promise<void>((resolve, reject) => {
      let spawned = false;
      child.once('spawn', () => {
        spawned = true;
        resolve();
      });
      child.on('error', (error) => {
        if (spawned) {
          // After the start only signalling can fail, and signals are sent with process.kill, not child.kill.
          this.emitLine(machineId, `supervisor: ${messageOf(error)}`);
          return;
        }
        // A failed spawn emits no 'exit'.
        markExited({ code: null, signal: null });
        reject(new OrchestratorError(`machine ${machineId}: cannot start ${command}: ${messageOf(error)}`, true, { cause: error }));
      });
    });
  }

  private forwardLines(machineId: string, stream: Readable): void {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => this.emitLine(machineId, line));
  }

  private emitLine(machineId: string, line: string): void {
    try {
      this.output(machineId, line);
    } catch (error) {
      // A faulty sink must not take down the supervisor of every machine.
      process.stderr.write(`[${machineId}] (output callback failed: ${messageOf(error)}) ${line}\n`);
    }
  }

  /** SIGTERM (and SIGCONT, for a stopped group), SIGKILL after the grace, until the group is gone. */
  private async stopGroup(record: MachineRecord, incarnation: Incarnation): Promise<void> {
    if (this.isGone(incarnation)) return;
    signalGroup(incarnation, 'SIGTERM');
    signalGroup(incarnation, 'SIGCONT');
    if (await this.waitUntilGone(incarnation, this.stopGraceMs)) return;
    await this.killGroup(record, incarnation);
  }

  private async killGroup(record: MachineRecord, incarnation: Incarnation): Promise<void> {
    if (this.isGone(incarnation)) return;
    signalGroup(incarnation, 'SIGKILL');
    if (await this.waitUntilGone(incarnation, KILL_WAIT_MS)) return;
    throw new OrchestratorError(
      `machine ${record.spec.machineId}: process group ${incarnation.pid} still has live processes ${KILL_WAIT_MS} ms after SIGKILL`,
      true,
    );
  }

  private async waitUntilGone(incarnation: Incarnation, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.isGone(incarnation)) return true;
      if (Date.now() >= deadline) return false;
      await delay(GROUP_POLL_MS);
    }
  }

  /** The leader has exited (its 'exit' seen, so the status is consistent) and nothing live is left in its group. */
  private isGone(incarnation: Incarnation): boolean {
    if (incarnation.groupGone) return true;
    if (!incarnation.exit || groupHasLiveMembers(incarnation.pid!)) return false;
    this.markGroupGone(incarnation);
    return true;
  }

  private markGroupGone(incarnation: Incarnation): void {
    incarnation.groupGone = true;
    if (incarnation.pid !== undefined) this.orphanGuard.forget(incarnation.pid);
  }

  private allocateMachineId(role: Role): string {
    for (let attempt = 0; attempt < MAX_ID_ATTEMPTS; attempt++) {
      const sequence = this.nextSequence.get(role) ?? 0;
      this.nextSequence.set(role, sequence + 1);
      const machineId = this.machineIdFor(role, sequence);
      if (!this.records.has(machineId)) return machineId;
    }
    throw new OrchestratorError(`machineIdFor gave ${MAX_ID_ATTEMPTS} ids in a row that are already in use (role ${role})`, false);
  }

  private recordsOfJob(jobId: string): MachineRecord[] {
    return [...this.records.values()].filter((record) => record.jobId === jobId && !record.retired);
  }

  private recordOf(machineId: string): MachineRecord {
    const record = this.records.get(machineId);
    if (!record) throw new OrchestratorError(`unknown machine ${machineId}`, false);
    return record;
  }

  /** At most once per operationId (see OperationMemo); refused once the adapter is closed. */
  private async once<T>(operationId: string, kind: OperationKind, run: () => Promise<T>): Promise<T> {
    this.assertOpen();
    return this.operations.once(operationId, kind, run);
  }

  private assertOpen(): void {
    if (this.closing) throw new OrchestratorError('the local process supervisor is closed', false);
  }
}

function throwIfAnyFailed(what: string, results: PromiseSettledResult<unknown>[]): void {
  const errors = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as unknown);
  if (errors.length === 0) return;
  if (errors.length === 1) throw errors[0];
  // Worth retrying only if every part is: retrying cannot fix the others.
  const retriable = errors.every((error) => error instanceof OrchestratorError && error.retriable);
  throw new OrchestratorError(`${what}: ${errors.map(messageOf).join('; ')}`, retriable, { cause: errors[0] });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
