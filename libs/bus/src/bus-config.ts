import { z } from 'zod';
import { InProcessBus } from './in-process/in-process-bus';
import { KafkaBus } from './kafka/kafka-bus';
import { BusLogger, MessageBus } from './message-bus';

/** Which bus a process uses: Kafka when `KAFKA_BROKERS` is set, else the in-process bus (embedded mode). */
export const BusConfig = z.discriminatedUnion('adapter', [
  z.object({ adapter: z.literal('kafka'), brokers: z.array(z.string().regex(/^[^:\s]+:\d+$/, 'expected host:port')).min(1), clientId: z.string().min(1) }),
  z.object({ adapter: z.literal('in-process') }),
]);
export type BusConfig = z.infer<typeof BusConfig>;

export function busConfigFromEnv(env: NodeJS.ProcessEnv, clientId: string): BusConfig {
  const brokers = env.KAFKA_BROKERS?.split(',').map((b) => b.trim()).filter(Boolean);
  const raw = brokers && brokers.length > 0 ? { adapter: 'kafka', brokers, clientId } : { adapter: 'in-process' };
  const parsed = BusConfig.safeParse(raw);
  if (!parsed.success) throw new Error(`invalid KAFKA_BROKERS=${env.KAFKA_BROKERS}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

export function createBus(config: BusConfig, logger?: BusLogger): MessageBus {
  return config.adapter === 'kafka'
    ? new KafkaBus({ brokers: config.brokers, clientId: config.clientId, logger })
    : new InProcessBus({ logger });
}
