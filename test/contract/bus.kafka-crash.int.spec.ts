import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { createMessage } from '@robustrl/contracts';
import { KafkaBus } from '@robustrl/bus';
import { freshPostgresStore } from '@robustrl/testing/databases';

/**
 * The crash the contract suite simulates with a throw, done for real: a consumer process that dies
 * (process.exit) after its effect and checkpoint committed but before Kafka got the offset.
 */
describe('Kafka consumer process killed between effect and offset commit', () => {
  it('redelivers to the next process, which finds the checkpoint and does not repeat the effect', async () => {
    const { store, drop } = await freshPostgresStore();
    const topicPrefix = `test-${randomUUID()}.`;
    const bus = new KafkaBus({
      brokers: process.env.KAFKA_BROKERS!.split(','),
      clientId: 'crash-test',
      topicPrefix,
      logger: { info() {}, warn() {}, error: console.error },
    });
    try {
      await store.transaction((m) => m.query(`CREATE TABLE crash_counts (event_id UUID PRIMARY KEY, handled INTEGER NOT NULL)`));
      const jobId = `job-${randomUUID()}`;
      const event = createMessage(
        'TrainingStepCompleted',
        { step: 3, batchId: 'b3', durationMs: 5 },
        { jobId, source: 'crash-test', occurredAt: new Date().toISOString() },
      );
      await bus.publish(event);

      const groupId = `crash-${randomUUID()}`;
      const run = (mode: 'crash' | 'normal') =>
        spawnSync(process.execPath, [join(__dirname, 'crash-consumer.js'), groupId, event.eventId, mode], {
          env: {
            ...process.env,
            ROBUSTRL_TOPIC_PREFIX: topicPrefix,
            DATABASE_URL: store.dataSource.options.type === 'postgres' ? (store.dataSource.options as { url: string }).url : '',
          },
          encoding: 'utf8',
          timeout: 60_000,
        });

      const crashed = run('crash');
      expect(crashed.status).toBe(17);
      const first = JSON.parse(crashed.stdout.trim());
      expect(first.outcome).toBe('applied');

      const resumed = run('normal');
      expect(resumed.stderr).toBe('');
      expect(resumed.status).toBe(0);
      const second = JSON.parse(resumed.stdout.trim());
      expect(second).toEqual({ outcome: 'duplicate', offset: first.offset });

      const rows: Array<{ handled: number }> = await store.dataSource.query(`SELECT handled FROM crash_counts WHERE event_id = $1`, [event.eventId]);
      expect(rows).toEqual([{ handled: 1 }]);
    } finally {
      await bus.close();
      await drop();
    }
  });
});
