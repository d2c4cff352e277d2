import { randomUUID } from 'node:crypto';
import { AddressInfo, connect, createServer, Server, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { KafkaBus, Subscription } from '@robustrl/bus';
import { createMessage, DataOf, MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { eventually } from '@robustrl/testing/eventually';
import { ServiceProcess } from './fixtures/service-process';

/**
 * The controller killed with kill -9 in the middle of a recovery, as a deployment runs it: its built
 * main in its own process, on the real Kafka broker and a real PostgreSQL database (docs/contributors/recovery.md,
 * docs/contributors/snapshots.md). `services/controller/src/controller-restart.spec.ts` shows the same in one
 * process with a bus that throws; this shows it with a process that is gone, at the moments that matter:
 *
 *  - after its command went out and before the command's answer came (the answer arrives while it is down);
 *  - after it consumed the fault and decided, with the decision's write not yet in the store;
 *  - with the decision committed in the store and not yet relayed to the bus;
 *  - after the command timed out while it was down, and again between committing that timeout and relaying it;
 *  - down past the command's timeout with its answer, published in time, waiting on the bus.
 *
 * Each time the restarted controller finishes the recovery, and no decision, command or outcome exists
 * twice for one cause. "Twice" counts events (distinct event ids): a record relayed again after a crash
 * carries the same event id and consumers apply it once (docs/contributors/delivery-guarantees.md), while a decision
 * taken again would be a second event — a second, different command for the same fault.
 *
 * The exact moments inside a write come from a proxy in front of PostgreSQL (`StoreGate`): it recognises
 * the controller's decision write by its bound parameters and holds either the write itself or the
 * store's answer to it, so the kill lands in that window every run rather than by luck of timing.
 */

const BROKERS = process.env.KAFKA_BROKERS!.split(',');

jest.setTimeout(120_000);

/**
 * A TCP proxy between the controller and PostgreSQL that passes everything through until a trap is set.
 * The controller writes a decision as one prepared statement (`robustrl_write_decision`,
 * libs/store/src/decision-write.ts) whose Bind message carries the job id and the types it writes. The
 * first Bind with every marker springs the trap on its connection:
 *
 *  - `before-commit`: that Bind and whatever follows it on the connection never reach the store — the
 *    process decided, and dies before anything of the decision is durable;
 *  - `after-commit`: the write reaches the store and commits, but the store's answer never reaches the
 *    process — the decision is durable and, as the relay runs only after the answer, not on the bus.
 */
class StoreGate {
  private server?: Server;
  private trap: { markers: string[]; at: 'before-commit' | 'after-commit'; sprung: () => void } | null = null;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly target: URL) {}

  /** The database URL through the gate. */
  async open(): Promise<string> {
    this.server = createServer((client) => this.pipe(client));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const url = new URL(this.target);
    url.host = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return url.toString();
  }

  /** Resolves when the next decision write carrying every marker was stopped at `at`. */
  arm(at: 'before-commit' | 'after-commit', markers: string[]): Promise<void> {
    return new Promise((resolve) => (this.trap = { markers: ['robustrl_write_decision', ...markers], at, sprung: resolve }));
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  private pipe(client: Socket): void {
    const store = connect(Number(this.target.port || 5432), this.target.hostname);
    this.sockets.add(client).add(store);
    let pending = Buffer.alloc(0);
    // The startup message has no type byte; every message after it is type, int32 length, payload.
    let startup = true;
    let holdRequests = false;
    let holdAnswers = false;
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const head = startup ? 0 : 1;
        if (pending.length < head + 4) return;
        const length = head + pending.readInt32BE(head);
        if (pending.length < length) return;
        const message = pending.subarray(0, length);
        pending = pending.subarray(length);
        if (startup)
          startup = message.readInt32BE(4) === 80877103; // an SSLRequest comes before the startup message
        else if (this.trap && message[0] === 0x42 /* Bind */ && this.trap.markers.every((m) => message.includes(m))) {
          const trap = this.trap;
          this.trap = null;
          if (trap.at === 'before-commit') holdRequests = true;
          else holdAnswers = true;
          trap.sprung();
        }
        if (!holdRequests) store.write(message);
      }
    });
    store.on('data', (chunk: Buffer) => {
      if (!holdAnswers) client.write(chunk);
    });
    const end = () => {
      client.destroy();
      store.destroy();
      this.sockets.delete(client);
      this.sockets.delete(store);
    };
    for (const s of [client, store]) {
      s.on('close', end);
      s.on('error', end);
    }
  }
}

/**
 * One deployment: its own topics (prefix) and database, the controller process (its store through the
 * gate, no orchestrator: agents' answers are published by the test), and an observer of the control topic.
 */
class Deployment {
  readonly topicPrefix = `e2e-ctlkill-${randomUUID().slice(0, 8)}.`;
  /** Every record seen on the control topic, relays after a crash included. */
  readonly seen: RobustrlMessage[] = [];
  controller!: ServiceProcess;
  gate!: StoreGate;
  pg!: Client;
  private bus!: KafkaBus;
  private observer!: Subscription;
  private database!: { url: string; drop(): Promise<void> };

  constructor(private readonly env: Record<string, string> = {}) {}

  async open(): Promise<void> {
    this.database = await freshDatabaseUrl('robustrl_e2e');
    this.gate = new StoreGate(new URL(this.database.url));
    const gatedUrl = await this.gate.open();
    this.bus = new KafkaBus({
      brokers: BROKERS,
      clientId: 'e2e-ctlkill',
      topicPrefix: this.topicPrefix,
      logger: { info: () => undefined, warn: () => undefined, error: console.error },
    });
    await this.bus.ensureTopics();
    this.observer = await this.bus.subscribe({
      groupId: `e2e-ctlkill-observer-${randomUUID()}`,
      topics: [Topics.control, Topics.replies],
      handler: async (d) => void this.seen.push(d.message),
    });
    this.controller = new ServiceProcess('controller', {
      KAFKA_BROKERS: BROKERS.join(','),
      DATABASE_URL: gatedUrl,
      ROBUSTRL_TOPIC_PREFIX: this.topicPrefix,
      ROBUSTRL_HTTP_PORT: 'off',
      ROBUSTRL_ORCHESTRATOR: 'none',
      ...this.env,
    });
    await this.controller.restart();
    this.pg = new Client({ connectionString: this.database.url });
    await this.pg.connect();
  }

  async close(): Promise<void> {
    await this.controller?.kill('SIGTERM');
    await this.pg?.end();
    await this.observer?.close();
    await this.bus?.close();
    await this.gate?.close();
    await this.database?.drop();
  }

  msg<T extends MessageType>(jobId: string, type: T, data: DataOf<T>): MessageOf<T> {
    return createMessage(type, data, { jobId, source: 'e2e', occurredAt: new Date().toISOString() });
  }

  publish(...messages: RobustrlMessage[]): Promise<unknown> {
    return this.bus.publish(messages);
  }

  /** Distinct events of a type for the job (a record relayed again carries the same event id), in the order first seen. */
  events<T extends MessageType>(jobId: string, type: T): Array<MessageOf<T>> {
    const byId = new Map<string, RobustrlMessage>();
    for (const m of this.seen) if (m.jobId === jobId && m.type === type && !byId.has(m.eventId)) byId.set(m.eventId, m);
    return [...byId.values()] as Array<MessageOf<T>>;
  }

  /** Every recovery command issued for the job, one line per event: `<type> <commandId>`. */
  commands(jobId: string): string[] {
    const types = ['RestartTrainerGroup', 'PromoteRolloutToTrainer', 'ReplaceMachine', 'RestartRolloutEngine', 'RestartTask'] as const;
    const byId = new Map<string, string>();
    for (const m of this.seen) {
      if (m.jobId !== jobId || !(types as readonly string[]).includes(m.type)) continue;
      byId.set(m.eventId, `${m.type} ${(m.data as { commandId: string }).commandId}`);
    }
    return [...byId.values()];
  }

  /** Records seen for the job (not events): more than the events when something was relayed again. */
  records(jobId: string): number {
    return this.seen.filter((m) => m.jobId === jobId).length;
  }

  awaitEvent<T extends MessageType>(jobId: string, type: T, match: (m: MessageOf<T>) => boolean = () => true, timeoutMs = 30_000): Promise<MessageOf<T>> {
    return eventually(`${type} for ${jobId}`, () => this.events(jobId, type).find(match), timeoutMs);
  }

  /**
   * A job one step in, with a checkpoint — past its first iteration, so a trainer fault restarts the trainer
   * group rather than the task (docs/contributors/recovery.md) — and the controller having applied all of it: the
   * fault could otherwise overtake it.
   */
  async startJob(jobId: string, mode: 'sync' | 'async'): Promise<void> {
    const machine = (machineId: string, role: 'trainer' | 'rollout') =>
      this.msg(jobId, 'MachineRegistered', {
        machineId,
        role,
        zone: 'az-1',
        hardwareClass: 'h100x8',
        gpus: 8,
        agentAddress: `${machineId}:8086`,
        dpRank: 0,
        incarnation: `${machineId}-1`,
      });
    // In the order a job makes them, each applied before the next: they travel on different topics
    // (membership, training, verdicts) and a step completed before its JobStarted would read as a first
    // iteration again, where any fault restarts the task.
    const history = [
      [
        this.msg(jobId, 'JobStarted', { mode, resumedFromStep: null, trainerMachines: 1, rolloutMachines: 1 }),
        machine('trainer-0', 'trainer'),
        machine('r0', 'rollout'),
      ],
      [
        this.msg(jobId, 'TrainingStepCompleted', { step: 0, batchId: 'b0', durationMs: 1_000 }),
        this.msg(jobId, 'CheckpointSaved', { step: 0, uri: 'file:///ckpt/0', blockingMs: 10 }),
      ],
    ];
    for (const messages of history) {
      await this.publish(...messages);
      for (const m of messages) await this.applied(m);
    }
  }

  /** A trainer process fault (no hardware evidence): the controller restarts the trainer group. */
  trainerFault(jobId: string): MessageOf<'FaultConfirmed'> {
    return this.msg(jobId, 'FaultConfirmed', {
      verdictId: `trainer-0/explicit-signal/${randomUUID().slice(0, 8)}`,
      machineId: 'trainer-0',
      role: 'trainer',
      rule: 'explicit-signal',
      handledAs: 'trainer',
      machineFaulty: false,
      detectionLatencyMs: 0,
      evidence: { signal: 'process-exited', detail: 'trainer exited 1' },
    });
  }

  /** An agent's answer: the command was carried out on `machineId`. */
  succeeded(
    jobId: string,
    command: { recoveryId: string; commandId: string },
    machineId: string,
    newMachineId?: string,
  ): MessageOf<'RecoveryCommandSucceeded'> {
    return this.msg(jobId, 'RecoveryCommandSucceeded', {
      recoveryId: command.recoveryId,
      commandId: command.commandId,
      machineId,
      executor: `agent/${machineId}`,
      durationMs: 100,
      ...(newMachineId ? { newMachineId } : {}),
    });
  }

  /** The restarted trainer reporting in: the reconnect stage ends and the recovery completes. */
  reportedIn(jobId: string, machineId: string): MessageOf<'RolePhaseChanged'> {
    return this.msg(jobId, 'RolePhaseChanged', { machineId, role: 'trainer', phase: 'initializing', step: 1, changedAt: new Date().toISOString() });
  }

  /**
   * Until the controller has applied the message. A life sign is published only after the answer it follows
   * was taken: it travels on another topic and could be consumed first, where it would not count (it must
   * come after the restart the answer reports).
   */
  async applied(message: RobustrlMessage): Promise<void> {
    await eventually(`the controller applied ${message.type} ${message.eventId}`, async () => {
      const { rowCount } = await this.pg.query(`SELECT 1 FROM robustrl_inbox WHERE consumer = 'controller' AND event_id = $1`, [message.eventId]);
      return rowCount ? true : undefined;
    });
  }

  /** The controller's outbox rows of the job: what it committed to relay, and whether it did. */
  async outbox(jobId: string): Promise<Array<{ eventId: string; type: string; published: boolean }>> {
    const { rows } = await this.pg.query(
      `SELECT event_id::text AS "eventId", message->>'type' AS type, published_at IS NOT NULL AS published
         FROM robustrl_outbox WHERE consumer = 'controller' AND message->>'jobId' = $1 ORDER BY position`,
      [jobId],
    );
    return rows;
  }
}

describe('the controller killed with kill -9 mid-recovery (real process, Kafka, PostgreSQL)', () => {
  describe('with the default command timeout', () => {
    const d = new Deployment();
    beforeAll(() => d.open(), 90_000);
    afterAll(() => d.close());

    it('killed after its command went out and before the answer: the restarted controller takes the answer, completes the recovery once, and issues nothing twice', async () => {
      const jobId = `job-answer-${randomUUID().slice(0, 8)}`;
      await d.startJob(jobId, 'async');
      const fault = d.trainerFault(jobId);
      const recoveryId = `${fault.data.verdictId}/recovery`;
      await d.publish(fault);
      const restart = await d.awaitEvent(jobId, 'RestartTrainerGroup');
      await d.controller.kill('SIGKILL');

      // While it is down, the trainer's agent carries the restart out and says so.
      const answer = d.succeeded(jobId, restart.data, 'trainer-0');
      await d.publish(answer);
      await d.controller.restart();
      await d.applied(answer);
      // The restarted trainer reports in: the recovery can only complete from a rebuilt state that holds
      // the command (issued before the kill) and its answer (published while the controller was down).
      await d.publish(d.reportedIn(jobId, 'trainer-0'));
      await d.awaitEvent(jobId, 'RecoveryCompleted');
      await sleep(2_000); // time for anything decided twice to show

      expect(restart.data).toMatchObject({ recoveryId, commandId: `${recoveryId}/1`, machines: ['trainer-0'] });
      expect(d.events(jobId, 'RecoveryDecided').map((m) => [m.causationId, m.data.recoveryId, m.data.action])).toEqual([
        [fault.eventId, recoveryId, 'restart-trainer-group'],
      ]);
      expect(d.commands(jobId)).toEqual([`RestartTrainerGroup ${recoveryId}/1`]);
      expect(d.events(jobId, 'RecoveryCommandFailed')).toEqual([]);
      expect(d.events(jobId, 'RecoveryCompleted').map((m) => [m.data.recoveryId, m.data.outcome])).toEqual([[recoveryId, 'recovered']]);
      // It came back from the store: the decision and its command among the rows it read.
      expect(d.controller.loaded().snapshotRows + d.controller.loaded().inboxRows).toBeGreaterThan(0);
    });

    it.each([
      ['decided, its write not yet in the store', 'before-commit'],
      ['its decision committed, not yet relayed', 'after-commit'],
    ] as const)(
      'killed after consuming the fault, %s: after the restart the decision and the command exist exactly once and the recovery completes',
      async (_, at) => {
        const jobId = `job-${at}-${randomUUID().slice(0, 8)}`;
        await d.startJob(jobId, 'async');
        const fault = d.trainerFault(jobId);
        const recoveryId = `${fault.data.verdictId}/recovery`;
        const stopped = d.gate.arm(at, [jobId, 'FaultConfirmed']);
        await d.publish(fault);
        await stopped;
        let committed: Array<{ eventId: string; type: string; published: boolean }> = [];
        if (at === 'after-commit') {
          committed = await eventually('the decision committed', async () => {
            const rows = await d.outbox(jobId);
            return rows.length > 0 ? rows : undefined;
          });
        }
        await d.controller.kill('SIGKILL');

        // Killed where it was meant to be: with nothing of the decision relayed, and durable only after the commit.
        expect(committed.map((r) => [r.type, r.published])).toEqual(
          at === 'after-commit'
            ? [
                ['RecoveryDecided', false],
                ['RestartTrainerGroup', false],
              ]
            : [],
        );
        expect(await d.outbox(jobId)).toEqual(committed);
        await sleep(500);
        expect(d.records(jobId)).toBe(0);

        await d.controller.restart();
        const restart = await d.awaitEvent(jobId, 'RestartTrainerGroup');
        // And the recovery goes on from there: answered, reported in, completed.
        const answer = d.succeeded(jobId, restart.data, 'trainer-0');
        await d.publish(answer);
        await d.applied(answer);
        await d.publish(d.reportedIn(jobId, 'trainer-0'));
        await d.awaitEvent(jobId, 'RecoveryCompleted');
        await sleep(2_000); // time for anything decided twice to show

        expect(d.events(jobId, 'RecoveryDecided').map((m) => [m.causationId, m.data.recoveryId, m.data.action])).toEqual([
          [fault.eventId, recoveryId, 'restart-trainer-group'],
        ]);
        expect(d.commands(jobId)).toEqual([`RestartTrainerGroup ${recoveryId}/1`]);
        if (at === 'after-commit') {
          // What was committed is what went out: relayed from the outbox, not decided again.
          expect(new Set([...d.events(jobId, 'RecoveryDecided'), ...d.events(jobId, 'RestartTrainerGroup')].map((m) => m.eventId))).toEqual(
            new Set(committed.map((r) => r.eventId)),
          );
        }
        expect(d.events(jobId, 'RecoveryCompleted').map((m) => [m.data.recoveryId, m.data.outcome])).toEqual([[recoveryId, 'recovered']]);
        expect((await d.outbox(jobId)).every((r) => r.published)).toBe(true);
        // Not even a record twice (the decision, the command, the answer, the completion): the fault delivered
        // again after the restart was recognised as decided, and nothing relayed was published again.
        expect(d.records(jobId)).toBe(4);
      },
    );
  });

  describe('with a 10 s command timeout', () => {
    const TIMEOUT_MS = 10_000;
    const d = new Deployment({ ROBUSTRL_COMMAND_TIMEOUT_SECONDS: String(TIMEOUT_MS / 1000) });
    beforeAll(() => d.open(), 90_000);
    afterAll(() => d.close());

    it('a command that timed out while the controller was down fails once after the restart, even when it is killed again between committing and relaying that', async () => {
      const jobId = `job-timeout-${randomUUID().slice(0, 8)}`;
      // Sync mode: no rollout may stand in, so a trainer machine that does not answer is asked to be replaced.
      await d.startJob(jobId, 'sync');
      const fault = d.trainerFault(jobId);
      const recoveryId = `${fault.data.verdictId}/recovery`;
      await d.publish(fault);
      const restart = await d.awaitEvent(jobId, 'RestartTrainerGroup');
      await d.controller.kill('SIGKILL');
      // Down past the command's timeout, and nobody answers it.
      await sleep(Date.parse(restart.occurredAt) + TIMEOUT_MS + 500 - Date.now());

      // The restarted controller fails the command (a tick: its ids are random, not derived from an input);
      // it is killed again once that is committed and before it is relayed.
      const stopped = d.gate.arm('after-commit', [jobId, 'RecoveryCommandFailed']);
      d.controller.start();
      await stopped;
      const committed = await eventually('the timeout committed', async () => {
        const rows = (await d.outbox(jobId)).filter((r) => !r.published);
        return rows.length > 0 ? rows : undefined;
      });
      await d.controller.kill('SIGKILL');
      expect(committed.map((r) => r.type)).toEqual(['RecoveryCommandFailed', 'RecoveryDecided', 'ReplaceMachine']);

      // Third incarnation: relays the committed timeout and its consequence, decides neither again.
      await d.controller.restart();
      const replace = await d.awaitEvent(jobId, 'ReplaceMachine');
      expect(replace.data).toMatchObject({ commandId: `${recoveryId}/2`, machineId: 'trainer-0', role: 'trainer' });
      // The orchestrator brings trainer-1; the controller restarts the group with it; it reports in.
      await d.publish(
        d.msg(jobId, 'MachineRegistered', {
          machineId: 'trainer-1',
          role: 'trainer',
          zone: 'az-1',
          hardwareClass: 'h100x8',
          gpus: 8,
          agentAddress: 'trainer-1:8086',
          dpRank: 0,
          incarnation: 'trainer-1-1',
        }),
        d.succeeded(jobId, replace.data, 'trainer-0', 'trainer-1'),
      );
      const regroup = await d.awaitEvent(jobId, 'RestartTrainerGroup', (m) => m.data.commandId === `${recoveryId}/3`);
      expect(regroup.data.machines).toEqual(['trainer-1']);
      const answer = d.succeeded(jobId, regroup.data, 'trainer-1');
      await d.publish(answer);
      await d.applied(answer);
      await d.publish(d.reportedIn(jobId, 'trainer-1'));
      await d.awaitEvent(jobId, 'RecoveryCompleted');
      await sleep(2_000); // time for anything decided twice to show

      // The timeout was acted on once: one failure, one new decision, one replacement — the ones committed before the kill.
      const failed = d.events(jobId, 'RecoveryCommandFailed');
      expect(failed.map((m) => [m.data.commandId, m.data.executor])).toEqual([[`${recoveryId}/1`, 'controller']]);
      expect(d.events(jobId, 'RecoveryDecided').map((m) => m.data.action)).toEqual(['restart-trainer-group', 'request-new-trainer-machine']);
      expect(d.commands(jobId)).toEqual([`RestartTrainerGroup ${recoveryId}/1`, `ReplaceMachine ${recoveryId}/2`, `RestartTrainerGroup ${recoveryId}/3`]);
      expect([failed[0], d.events(jobId, 'RecoveryDecided')[1], replace].map((m) => m.eventId)).toEqual(committed.map((r) => r.eventId));
      expect(d.events(jobId, 'RecoveryCompleted').map((m) => [m.data.recoveryId, m.data.outcome])).toEqual([[recoveryId, 'recovered']]);
    });

    it('an answer that came in time while the controller was down is taken, though the timeout passed before the restart', async () => {
      const jobId = `job-late-${randomUUID().slice(0, 8)}`;
      await d.startJob(jobId, 'sync');
      const fault = d.trainerFault(jobId);
      const recoveryId = `${fault.data.verdictId}/recovery`;
      await d.publish(fault);
      const restart = await d.awaitEvent(jobId, 'RestartTrainerGroup');
      await d.controller.kill('SIGKILL');
      // Answered well within the timeout, and still down when the timeout passes.
      const answer = d.succeeded(jobId, restart.data, 'trainer-0');
      await d.publish(answer);
      await sleep(Date.parse(restart.occurredAt) + TIMEOUT_MS + 500 - Date.now());

      // The restarted controller's first tick comes a second after its consumer joined the group, by when
      // it has read the answer from the backlog: the timeout is judged on everything that came in time.
      await d.controller.restart();
      await d.applied(answer);
      await d.publish(d.reportedIn(jobId, 'trainer-0'));
      await eventually(
        'the recovery completed, or the command failed',
        () => d.events(jobId, 'RecoveryCompleted')[0] ?? d.events(jobId, 'RecoveryCommandFailed')[0],
      );
      await sleep(2_000); // time for a late timeout to show

      expect(d.events(jobId, 'RecoveryCommandFailed')).toEqual([]);
      expect(d.commands(jobId)).toEqual([`RestartTrainerGroup ${recoveryId}/1`]);
      expect(d.events(jobId, 'RecoveryDecided').map((m) => m.data.action)).toEqual(['restart-trainer-group']);
      expect(d.events(jobId, 'RecoveryCompleted').map((m) => [m.data.recoveryId, m.data.outcome])).toEqual([[recoveryId, 'recovered']]);
    });
  });
});
