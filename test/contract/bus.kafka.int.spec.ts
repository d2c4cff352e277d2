import { randomUUID } from 'node:crypto';
import { DEAD_LETTER_TOPIC } from '@robustrl/contracts';
import { fromDeadLetterRecord, KafkaBus } from '@robustrl/bus';
import { freshPostgresStore } from '@robustrl/testing/databases';
import { KafkaTopicReader } from '@robustrl/testing/kafka-topic-reader';
import { describeBusContract } from './bus-contract';

describeBusContract('Kafka broker with PostgreSQL store', async () => {
  const brokers = process.env.KAFKA_BROKERS!.split(',');
  // Topics of their own, so a broker's history (other runs, benchmarks) never slows or confuses the suite.
  const topicPrefix = `test-${randomUUID()}.`;
  const { store, drop } = await freshPostgresStore();
  const bus = new KafkaBus({
    brokers,
    clientId: 'contract-test',
    topicPrefix,
    logger: { info: () => undefined, warn: () => undefined, error: console.error },
    deadLetterLedger: store.deadLetterClaims,
  });
  await bus.ensureTopics();
  const dlq = await new KafkaTopicReader(brokers, topicPrefix + DEAD_LETTER_TOPIC).start();
  return {
    bus,
    store,
    deadLetters: () => dlq.records.map(fromDeadLetterRecord),
    withIdentity: async (identity) => {
      const peer = new KafkaBus({
        brokers,
        clientId: 'contract-test-identity',
        topicPrefix,
        logger: { info: () => undefined, warn: () => undefined, error: console.error },
        identity,
      });
      return { bus: peer, deadLetters: () => dlq.records.map(fromDeadLetterRecord), teardown: () => peer.close() };
    },
    teardown: async () => {
      await dlq.stop();
      await bus.close();
      await drop();
    },
  };
});
