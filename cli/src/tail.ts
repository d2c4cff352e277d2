import { randomUUID } from 'node:crypto';
import { Kafka } from 'kafkajs';
import { ALL_TOPICS, DEAD_LETTER_TOPIC, decodeMessage, formatMessageLine } from '@robustrl/contracts';
import { describeConsumerError, fromDeadLetterRecord, kafkaClientOf } from '@robustrl/bus';

export interface TailOptions {
  brokers: string[];
  /** TLS and a login to the brokers (bus-config.ts kafkaSecurityFromEnv: KAFKA_SSL_CA_FILE, KAFKA_SASL_*). */
  security?: { ssl?: { ca?: string }; sasl?: { mechanism: string; username: string; password: string } };
  topics: string[];
  /** Topic prefix of the deployment (see KafkaBus `topicPrefix`). */
  topicPrefix: string;
  job?: string;
  json: boolean;
  fromBeginning: boolean;
  /** Stop after this many printed records (for scripts and tests); undefined = follow forever. */
  limit?: number;
  out: (line: string) => void;
  err: (line: string) => void;
}

/**
 * `robustrl tail`: follow robustrl topics and print one line per record. It joins a throwaway
 * consumer group and never commits, so tailing never moves a service's offsets.
 */
export async function tail(options: TailOptions): Promise<{ stop(): Promise<void>; done: Promise<void> }> {
  const kafka = kafkaClientOf({ brokers: options.brokers, security: options.security }, 'robustrl-tail');
  const groupId = `${options.topicPrefix}robustrl-tail-${randomUUID()}`;
  const consumer = kafka.consumer({ groupId });
  let printed = 0;
  let finish!: () => void;
  let fail!: (err: Error) => void;
  const done = new Promise<void>((resolve, reject) => ((finish = resolve), (fail = reject)));
  // kafkajs's own log is off: a crash is said here, and one it will not restart from ends the tail
  // (e.g. a login without the right to read a topic) instead of leaving it silent.
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    const why = describeConsumerError(payload.error, groupId);
    if (payload.restart) options.err(`consumer crashed, restarting: ${why}`);
    else fail(new Error(`consumer stopped: ${why}`));
  });

  await consumer.connect();
  const existing = new Set(await listTopics(kafka));
  const wanted = options.topics.map((t) => options.topicPrefix + t);
  const topics = wanted.filter((t) => existing.has(t));
  const missing = wanted.filter((t) => !existing.has(t));
  if (missing.length > 0) options.err(`not (yet) on the broker, skipped: ${missing.join(', ')}`);
  if (topics.length === 0) throw new Error(`none of the topics exist on ${options.brokers.join(',')}: ${options.topics.join(', ')}`);
  // Where "now" is, taken before joining: a fresh group resolves "latest" only at its first fetch, after
  // it announced that it follows, and a record published in between was never printed.
  const startAt = options.fromBeginning ? [] : await endOffsets(kafka, topics);
  await consumer.subscribe({ topics, fromBeginning: options.fromBeginning });

  let joined = false;
  consumer.on(consumer.events.GROUP_JOIN, () => {
    // Only on the first join: a rebalance later must not replay what was printed.
    if (!joined) for (const position of startAt) consumer.seek(position);
    joined = true;
    options.err(`following ${topics.length} topic(s) on ${options.brokers.join(',')}${options.job ? ` for job ${options.job}` : ''}`);
  });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      const key = message.key?.toString('utf8') ?? null;
      if (options.job && key !== options.job) return;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(message.headers ?? {})) if (v !== undefined) headers[k] = String(Array.isArray(v) ? v[0] : v);
      options.out(render(topic.slice(options.topicPrefix.length), partition, message.offset, key, message.value, headers, options.json));
      printed += 1;
      if (options.limit !== undefined && printed >= options.limit) finish();
    },
  });
  return { stop: () => consumer.disconnect(), done };
}

function render(
  topic: string,
  partition: number,
  offset: string,
  key: string | null,
  value: Buffer | null,
  headers: Record<string, string>,
  json: boolean,
): string {
  if (topic === DEAD_LETTER_TOPIC) {
    const dl = fromDeadLetterRecord({ key, value, headers });
    if (json) return JSON.stringify({ topic, partition, offset, deadLetter: { ...dl, value: value?.toString('utf8') ?? null } });
    return `${dl.deadLetteredAt} dead-letter  ${dl.originalTopic}/${dl.originalPartition}@${dl.originalOffset} job=${key} group=${dl.consumerGroup} ${dl.kind}: ${dl.reason}`;
  }
  const decoded = decodeMessage(value);
  if (!decoded.ok) {
    if (json) return JSON.stringify({ topic, partition, offset, key, invalid: decoded.reason, value: value?.toString('utf8') ?? null });
    return `${'?'.padEnd(24)} ${topic.replace(/^robustrl\./, '').padEnd(12)} INVALID job=${key} offset=${offset}: ${decoded.reason}`;
  }
  if (json) return JSON.stringify({ topic, partition, offset, message: decoded.message });
  return formatMessageLine(decoded.message, topic);
}

/** Each partition's end offset now: where a tail that does not read from the beginning starts. */
async function endOffsets(kafka: Kafka, topics: string[]): Promise<Array<{ topic: string; partition: number; offset: string }>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const out: Array<{ topic: string; partition: number; offset: string }> = [];
    for (const topic of topics) for (const p of await admin.fetchTopicOffsets(topic)) out.push({ topic, partition: p.partition, offset: p.high });
    return out;
  } finally {
    await admin.disconnect();
  }
}

async function listTopics(kafka: Kafka): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await admin.listTopics();
  } finally {
    await admin.disconnect();
  }
}

export const DEFAULT_TAIL_TOPICS = [...ALL_TOPICS, DEAD_LETTER_TOPIC];
