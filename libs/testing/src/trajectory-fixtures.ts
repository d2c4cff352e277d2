import { BusHealth, DeadLetterCount, DEFAULT_MAX_RECORD_BYTES, MessageBus, RawRecord, SubscribeOptions, Subscription } from '@robustrl/bus';
import { NewTrajectory, RobustrlMessage, TurnInput } from '@robustrl/contracts';

/** A bus that only records what was published (the store's events are fire-and-forget notifications). */
export class RecordingBus implements MessageBus {
  readonly adapter = 'in-process' as const;
  readonly maxRecordBytes = DEFAULT_MAX_RECORD_BYTES;
  readonly published: RobustrlMessage[] = [];
  async publish(messages: RobustrlMessage | readonly RobustrlMessage[]): Promise<void> {
    this.published.push(...(Array.isArray(messages) ? messages : [messages as RobustrlMessage]));
  }
  async publishRaw(_record: RawRecord): Promise<void> {}
  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    return { groupId: options.groupId, close: async () => undefined, acknowledge: async () => undefined };
  }
  async close(): Promise<void> {}
  async health(): Promise<BusHealth> {
    return { reachable: true, subscriptions: [] };
  }
  deadLetterCounts(): DeadLetterCount[] {
    return [];
  }
  ofType(type: RobustrlMessage['type']): RobustrlMessage[] {
    return this.published.filter((m) => m.type === type);
  }
}

export function trajectory(id: string, over: Partial<NewTrajectory> = {}): NewTrajectory {
  return {
    trajectoryId: id,
    jobId: 'job-1',
    batchId: 'batch-0',
    step: 0,
    promptId: `prompt-${id}`,
    sampleIndex: 0,
    prompt: { messages: [{ role: 'user', content: `solve ${id}` }] },
    ownerRolloutId: 'rollout-0/dp0',
    ...over,
  };
}

export function turn(trajectoryId: string, turnIndex: number, over: Partial<TurnInput> = {}): TurnInput {
  const kinds = ['model-output', 'tool-call', 'tool-result'] as const;
  return {
    trajectoryId,
    turnId: `${trajectoryId}/${turnIndex}`,
    turnIndex,
    kind: kinds[turnIndex % 3],
    content: { text: `turn ${turnIndex} of ${trajectoryId}`, n: turnIndex },
    rolloutId: 'rollout-0/dp0',
    weightVersion: 0,
    tokens: 100 + turnIndex,
    ...over,
  };
}
