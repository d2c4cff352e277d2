// A consumer in its own process, for the crash test: it applies its effect for one event (checkpoint
// compare-and-set in the same transaction) and then either dies before the offset commit (`crash`)
// or finishes normally (`normal`). Uses the built packages, like a deployed service would.
const { KafkaBus } = require('@robustrl/bus');
const { EventStore } = require('@robustrl/store');
const { Topics } = require('@robustrl/contracts');

const [groupId, eventId, mode] = process.argv.slice(2);
const quiet = { info() {}, warn() {}, error: (m, f) => console.error(m, f) };

(async () => {
  const store = await EventStore.open({ kind: 'postgres', url: process.env.DATABASE_URL });
  const bus = new KafkaBus({
    brokers: process.env.KAFKA_BROKERS.split(','),
    clientId: 'crash-consumer',
    topicPrefix: process.env.ROBUSTRL_TOPIC_PREFIX ?? '',
    logger: quiet,
  });
  let finished;
  const done = new Promise((resolve) => (finished = resolve));
  await bus.subscribe({
    groupId,
    topics: [Topics.training],
    handler: async (d) => {
      if (d.message.eventId !== eventId) return;
      const outcome = await store.applyOnce(groupId, d, (m) =>
        m.query(
          `INSERT INTO crash_counts (event_id, handled) VALUES ($1, 1)
           ON CONFLICT (event_id) DO UPDATE SET handled = crash_counts.handled + 1`,
          [eventId],
        ),
      );
      process.stdout.write(JSON.stringify({ outcome, offset: d.offset }) + '\n');
      if (mode === 'crash') process.exit(17); // effect durable, offset not committed
      finished();
    },
  });
  await done;
  await bus.close();
  await store.close();
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
