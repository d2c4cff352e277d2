import { localServiceEnv, startLocalServices } from './real-services';

/**
 * Integration tests need a real Kafka broker and a real PostgreSQL server. Use the ones named by
 * KAFKA_BROKERS / DATABASE_URL; otherwise start the project's own (deploy/local/, no Docker).
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.KAFKA_BROKERS && process.env.DATABASE_URL) {
    process.stderr.write(`\nintegration: using KAFKA_BROKERS=${process.env.KAFKA_BROKERS} and DATABASE_URL from the environment\n`);
    return;
  }
  process.stderr.write('\nintegration: starting the local Kafka broker and PostgreSQL server (deploy/local/services.sh up)\n');
  startLocalServices();
  const env = localServiceEnv();
  process.env.KAFKA_BROKERS ??= env.KAFKA_BROKERS;
  process.env.DATABASE_URL ??= env.DATABASE_URL;
  process.env.ROBUSTRL_TEST_STARTED_SERVICES = '1';
}
