import { z } from 'zod';
import { InProcessBus } from './in-process/in-process-bus';
import { KafkaBus } from './kafka/kafka-bus';
import { BusIdentity, BusLogger, DeadLetterLedger, MessageBus } from './message-bus';

/** Which bus a process uses: Kafka when `KAFKA_BROKERS` is set, else the in-process bus (embedded mode). */
export const BusConfig = z.discriminatedUnion('adapter', [
  z.object({
    adapter: z.literal('kafka'),
    brokers: z.array(z.string().regex(/^[^:\s]+:\d+$/, 'expected host:port')).min(1),
    clientId: z.string().min(1),
    topicPrefix: z.string().regex(/^[A-Za-z0-9._-]*$/, 'letters, digits, ".", "_" and "-" only'),
    /** ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS (`on`/`off`): see KafkaBusOptions.evictDeadMembers. */
    evictDeadMembers: z.boolean().optional(),
  }),
  z.object({ adapter: z.literal('in-process') }),
]);
export type BusConfig = z.infer<typeof BusConfig>;

export function busConfigFromEnv(env: NodeJS.ProcessEnv, clientId: string): BusConfig {
  const brokers = env.KAFKA_BROKERS?.split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  const evict = env.ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS;
  if (evict !== undefined && evict !== '' && evict !== 'on' && evict !== 'off') {
    throw new Error(`ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS must be 'on' or 'off', got '${evict}'`);
  }
  const raw =
    brokers && brokers.length > 0
      ? { adapter: 'kafka', brokers, clientId, topicPrefix: env.ROBUSTRL_TOPIC_PREFIX ?? '', evictDeadMembers: evict !== 'off' }
      : { adapter: 'in-process' };
  const parsed = BusConfig.safeParse(raw);
  if (!parsed.success) {
    throw new Error(
      `invalid bus configuration (KAFKA_BROKERS=${env.KAFKA_BROKERS}, ROBUSTRL_TOPIC_PREFIX=${env.ROBUSTRL_TOPIC_PREFIX}): ${z.prettifyError(parsed.error)}`,
    );
  }
  return parsed.data;
}

export function createBus(config: BusConfig, logger?: BusLogger, deadLetterLedger?: DeadLetterLedger, identity?: BusIdentity): MessageBus {
  return config.adapter === 'kafka'
    ? new KafkaBus({
        brokers: config.brokers,
        clientId: config.clientId,
        topicPrefix: config.topicPrefix,
        evictDeadMembers: config.evictDeadMembers ?? true,
        // Absent, not undefined: an undefined logger would override the adapter's default.
        ...(logger ? { logger } : {}),
        deadLetterLedger,
        ...(identity ? { identity } : {}),
      })
    : new InProcessBus({ logger, deadLetterLedger, ...(identity ? { identity } : {}) });
}
