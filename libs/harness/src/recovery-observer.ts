/** What the recovery-latency run (recovery-latency.ts) reads back of the control plane's output: verdicts, decisions and commands. */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Kafka, logLevel } from 'kafkajs';
import { Topics } from '@robustrl/contracts';

/** The controller's commands (control topic): the first one for a fault ends its measurement. */
export const COMMAND_TYPES = new Set(['RestartRolloutEngine', 'ReplaceMachine', 'RestartTrainerGroup', 'PromoteRolloutToTrainer', 'RestartTask']);

/** What the bench's observer keeps of a record on the verdicts or control topic (plain JSON, no schema). */
export interface Seen {
  type: string;
  jobId: string;
  correlationId: string;
  occurredAt: number;
  machineId: string | null;
  /** performance.now() when the bench's consumer got it. */
  consumedAt: number;
}

/**
 * A plain kafkajs consumer (no robustrl code) on the verdicts and control topics, from their start; each
 * robustrl record it gets goes to `onSeen`. Registered in `clients` as it starts, for the run's close().
 */
export async function observeVerdictsAndCommands(
  brokers: string[],
  topicPrefix: string,
  clients: Array<{ disconnect(): Promise<void> }>,
  onSeen: (seen: Seen) => void,
): Promise<void> {
  const kafka = new Kafka({ brokers, clientId: 'bench-recovery-observer', logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `bench-recovery-observer-${randomUUID()}`, maxWaitTimeInMs: 1_000 });
  clients.push(consumer);
  await consumer.connect();
  await consumer.subscribe({ topics: [topicPrefix + Topics.verdicts, topicPrefix + Topics.control], fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const consumedAt = performance.now();
      const seen = parseSeen(message.value, consumedAt);
      if (!seen) return;
      onSeen(seen);
    },
  });
}

function parseSeen(value: Buffer | null, consumedAt: number): Seen | null {
  if (!value) return null;
  try {
    const m = JSON.parse(value.toString()) as {
      type?: unknown;
      jobId?: unknown;
      correlationId?: unknown;
      occurredAt?: unknown;
      data?: { machineId?: unknown; rolloutMachineId?: unknown };
    };
    if (typeof m.type !== 'string' || typeof m.jobId !== 'string' || typeof m.correlationId !== 'string') return null;
    const machine = m.data?.machineId ?? m.data?.rolloutMachineId;
    return {
      type: m.type,
      jobId: m.jobId,
      correlationId: m.correlationId,
      occurredAt: typeof m.occurredAt === 'string' ? Date.parse(m.occurredAt) : NaN,
      machineId: typeof machine === 'string' ? machine : null,
      consumedAt,
    };
  } catch {
    return null; // not a robustrl message
  }
}
