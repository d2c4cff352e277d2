import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { InProcessBus } from './in-process/in-process-bus';
import { KafkaBus } from './kafka/kafka-bus';
import { BusIdentity, BusLogger, DeadLetterLedger, MessageBus } from './message-bus';
import {
  KAFKA_BROKERS,
  KAFKA_EVICT_DEAD_MEMBERS,
  KAFKA_SASL_MECHANISM,
  KAFKA_SASL_PASSWORD,
  KAFKA_SASL_USERNAME,
  KAFKA_SSL,
  KAFKA_SSL_CA_FILE,
  TOPIC_PREFIX,
} from './bus-settings';

/** Which bus a process uses: Kafka when `KAFKA_BROKERS` is set, else the in-process bus (embedded mode). */
export const BusConfig = z.discriminatedUnion('adapter', [
  z.object({
    adapter: z.literal('kafka'),
    brokers: z.array(z.string().regex(/^[^:\s]+:\d+$/, 'expected host:port')).min(1),
    clientId: z.string().min(1),
    topicPrefix: z.string().regex(/^[A-Za-z0-9._-]*$/, 'letters, digits, ".", "_" and "-" only'),
    /** ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS (`on`/`off`): see KafkaBusOptions.evictDeadMembers. */
    evictDeadMembers: z.boolean().optional(),
    /** TLS to the brokers: the CA's PEM (KAFKA_SSL_CA_FILE), or the system's CAs (KAFKA_SSL=true). */
    ssl: z.object({ ca: z.string().optional() }).optional(),
    /** The client's login (KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD or _FILE). */
    sasl: z.object({ mechanism: z.enum(['scram-sha-512', 'scram-sha-256', 'plain']), username: z.string().min(1), password: z.string().min(1) }).optional(),
  }),
  z.object({ adapter: z.literal('in-process') }),
]);
export type BusConfig = z.infer<typeof BusConfig>;

export function busConfigFromEnv(env: NodeJS.ProcessEnv, clientId: string): BusConfig {
  const brokers = KAFKA_BROKERS.read(env);
  const evictDeadMembers = KAFKA_EVICT_DEAD_MEMBERS.read(env);
  // The prefix names Kafka's topics and groups: the in-process bus has none to name.
  const topicPrefix = brokers && brokers.length > 0 ? TOPIC_PREFIX.read(env) : undefined;
  const raw =
    topicPrefix !== undefined
      ? {
          adapter: 'kafka',
          brokers,
          clientId,
          topicPrefix,
          evictDeadMembers,
          ...kafkaSecurityFromEnv(env),
        }
      : { adapter: 'in-process' };
  const parsed = BusConfig.safeParse(raw);
  if (!parsed.success) {
    throw new Error(`invalid bus configuration (KAFKA_BROKERS=${env.KAFKA_BROKERS}, ROBUSTRL_TOPIC_PREFIX=${topicPrefix}): ${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}

/**
 * TLS and SASL to the brokers from KAFKA_SSL / KAFKA_SSL_CA_FILE and KAFKA_SASL_MECHANISM /
 * KAFKA_SASL_USERNAME / KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE, a mounted secret). A login is
 * only ever sent over TLS: SASL without TLS is refused (a SCRAM exchange over plaintext would still
 * expose who connects and what they then read and write).
 */
export function kafkaSecurityFromEnv(env: NodeJS.ProcessEnv): { ssl?: { ca?: string }; sasl?: { mechanism: string; username: string; password: string } } {
  const caFile = KAFKA_SSL_CA_FILE.read(env);
  const sslFlag = KAFKA_SSL.read(env);
  let ssl: { ca?: string } | undefined;
  if (caFile) {
    try {
      ssl = { ca: readFileSync(caFile, 'utf8') };
    } catch (err) {
      throw new Error(`KAFKA_SSL_CA_FILE: cannot read ${caFile}: ${(err as Error).message}`);
    }
  } else if (sslFlag) ssl = {};
  const mechanism = KAFKA_SASL_MECHANISM.read(env);
  const username = KAFKA_SASL_USERNAME.read(env);
  if (!mechanism) {
    if (username) throw new Error('KAFKA_SASL_USERNAME is set without KAFKA_SASL_MECHANISM (scram-sha-512, scram-sha-256 or plain)');
    return ssl ? { ssl } : {};
  }
  if (!ssl) throw new Error('KAFKA_SASL_MECHANISM needs TLS to the brokers (KAFKA_SSL_CA_FILE, or KAFKA_SSL=true): a login is never sent in the clear');
  // The file wins over the value when both are set (bus-settings.ts).
  const password = KAFKA_SASL_PASSWORD.read(env);
  if (!username || !password) throw new Error('KAFKA_SASL_MECHANISM needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE)');
  return { ssl, sasl: { mechanism, username, password } };
}

export function createBus(config: BusConfig, logger?: BusLogger, deadLetterLedger?: DeadLetterLedger, identity?: BusIdentity): MessageBus {
  return config.adapter === 'kafka'
    ? new KafkaBus({
        brokers: config.brokers,
        clientId: config.clientId,
        topicPrefix: config.topicPrefix,
        evictDeadMembers: config.evictDeadMembers ?? true,
        ...(config.ssl ? { ssl: config.ssl } : {}),
        ...(config.sasl ? { sasl: config.sasl } : {}),
        // Absent, not undefined: an undefined logger would override the adapter's default.
        ...(logger ? { logger } : {}),
        deadLetterLedger,
        ...(identity ? { identity } : {}),
      })
    : new InProcessBus({ logger, deadLetterLedger, ...(identity ? { identity } : {}) });
}
