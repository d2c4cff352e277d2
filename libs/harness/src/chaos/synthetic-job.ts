import { randomUUID } from 'node:crypto';
import { KafkaBus, Subscription } from '@robustrl/bus';
import { createMessage, DataOf, DetectionSettings, isSample, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';

/**
 * A job's machines as the control plane sees them, without GPUs: every machine registers, trainers
 * report TensorCore activity inside the training phase, rollouts report throughput, each once per
 * interval, and every heartbeat probe is answered — all machines stay healthy, so any verdict is a
 * false one. Publishing goes through the bus like an agent's; a batch that the broker does not take
 * (it is down) is counted as failed, never as published, and the next one waits for it to finish.
 *
 * Samples are inputs to windows, not facts a consumer keeps (docs/contributors/snapshots.md "Telemetry is not a fact"): what
 * can be checked for loss afterwards are facts. So each interval also carries a beacon — a heartbeat
 * ack of a machine that is not in the job, a fact every detector keeps and no rule acts on.
 */
export const BEACON_MACHINE = 'chaos-beacon';

export class SyntheticJob {
  readonly jobId = `chaos-${randomUUID().slice(0, 8)}`;
  /** Ids of every fact the broker acknowledged (samples are not kept by their consumers: nothing to check them against). */
  readonly published = new Set<string>();
  /** Samples the broker acknowledged. */
  samplesPublished = 0;
  failedBatches = 0;
  skippedIntervals = 0;
  probesAnswered = 0;
  /** Machines that no longer report (their fault was signalled): left out of the samples. */
  readonly silenced = new Set<string>();
  private timer?: NodeJS.Timeout;
  private inFlight: Promise<void> | null = null;
  private prober?: Subscription;

  constructor(
    private readonly bus: KafkaBus,
    readonly machines: { trainers: number; rollouts: number },
    private readonly detection: DetectionSettings,
  ) {}

  get trainerIds(): string[] {
    return Array.from({ length: this.machines.trainers }, (_, i) => `trainer-${i}`);
  }

  get rolloutIds(): string[] {
    return Array.from({ length: this.machines.rollouts }, (_, i) => `rollout-${i}`);
  }

  message<T extends MessageType>(type: T, data: DataOf<T>): RobustrlMessage {
    return createMessage(type, data, { jobId: this.jobId, source: 'chaos-agents', occurredAt: new Date().toISOString() }) as RobustrlMessage;
  }

  /** JobStarted and the registrations (membership), then every trainer enters its training phase. */
  async begin(): Promise<void> {
    const { trainers, rollouts } = this.machines;
    await this.publish([
      this.message('JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: trainers, rolloutMachines: rollouts, detection: this.detection }),
    ]);
    await this.publish(
      [...this.trainerIds, ...this.rolloutIds].map((machineId, i) =>
        this.message('MachineRegistered', {
          machineId,
          role: machineId.startsWith('trainer') ? 'trainer' : 'rollout',
          zone: 'az-1',
          hardwareClass: 'h100x8',
          gpus: 8,
          agentAddress: `${machineId}:8086`,
          dpRank: machineId.startsWith('trainer') ? i : 0,
        }),
      ),
    );
    await this.publish(
      this.trainerIds.map((machineId) =>
        this.message('RolePhaseChanged', { machineId, role: 'trainer', phase: 'training', step: 1, changedAt: new Date().toISOString() }),
      ),
    );
    this.prober = await this.bus.subscribe({
      groupId: `chaos-agents-${this.jobId}`,
      topics: [Topics.heartbeat],
      types: ['HeartbeatProbeRequested'],
      fromBeginning: false,
      handler: async ({ message }) => {
        if (message.jobId !== this.jobId || message.type !== 'HeartbeatProbeRequested') return;
        await this.publish([
          this.message('HeartbeatAcked', { probeId: message.data.probeId, machineId: message.data.machineId, ackedAt: new Date().toISOString() }),
        ]);
        this.probesAnswered += 1;
      },
    });
  }

  /** Report every interval until stopped. */
  run(intervalMs: number): void {
    this.timer = setInterval(() => {
      if (this.inFlight) {
        this.skippedIntervals += 1;
        return;
      }
      this.inFlight = this.publish(this.samples())
        .catch(() => void (this.failedBatches += 1))
        .finally(() => (this.inFlight = null));
    }, intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.inFlight;
    await this.prober?.close();
  }

  /** Publish and remember what the broker acknowledged (a failed batch is not counted). */
  async publish(messages: RobustrlMessage[]): Promise<void> {
    await this.bus.publish(messages);
    for (const m of messages) {
      if (isSample(m.type)) this.samplesPublished += 1;
      else this.published.add(m.eventId);
    }
  }

  private samples(): RobustrlMessage[] {
    const now = new Date().toISOString();
    return [
      this.message('HeartbeatAcked', { probeId: `beacon/${randomUUID()}`, machineId: BEACON_MACHINE, ackedAt: now }),
      ...this.trainerIds
        .filter((machineId) => !this.silenced.has(machineId))
        .map((machineId) =>
          this.message('GpuActivitySampled', { machineId, sampledAt: now, intervalSeconds: 1, tensorActive: 0.6 + Math.random() * 0.3, source: 'emulated' }),
        ),
      ...this.rolloutIds
        .filter((rolloutId) => !this.silenced.has(rolloutId))
        .map((rolloutId) =>
          this.message('RolloutThroughputSampled', {
            machineId: rolloutId,
            rolloutId,
            sampledAt: now,
            windowSeconds: 1,
            tokensPerSecond: 700 + Math.random() * 300,
            completedRequests: 2,
            inFlightRequests: 6,
            awaitingTools: 1,
          }),
        ),
    ];
  }
}
