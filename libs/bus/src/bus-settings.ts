import { onOff, text } from '@robustrl/config';

/**
 * What every service reads for its bus (docs/operators/configuration-reference.md), read by busConfigFromEnv;
 * `KAFKA_BROKERS` and the brokers' TLS and login (`KAFKA_*`, docs/operators/kafka.md) are read by hand there.
 */
const owner = 'services';

export const TOPIC_PREFIX = text('ROBUSTRL_TOPIC_PREFIX', {
  owner,
  meaning: 'with Kafka: prefix of every topic and consumer group (several deployments on one cluster; tests use it for isolation)',
  default: '',
  defaultText: 'none',
  pattern: /^[A-Za-z0-9._-]*$/,
  accepted: "letters, digits, '.', '_' and '-'",
});
export const KAFKA_EVICT_DEAD_MEMBERS = onOff('ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS', {
  owner,
  meaning:
    '`on`: before joining a consumer group, remove the members that dead processes of this host left in it (kill -9), so a restart does not wait for them; `off`: wait (docs/contributors/delivery-guarantees.md)',
  default: true,
});
