// A replica of a service in its own process, for the group-membership test: it subscribes to the
// training topic in the given group through the built bus (as a deployed service does), says so on
// stdout with the time its subscription took, logs the bus's warnings there, and idles until killed.
const { KafkaBus } = require('@robustrl/bus');
const { Topics } = require('@robustrl/contracts');

const [groupId] = process.argv.slice(2);
const startedAt = Date.now();
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const bus = new KafkaBus({
  brokers: process.env.KAFKA_BROKERS.split(','),
  clientId: 'group-member',
  topicPrefix: process.env.ROBUSTRL_TOPIC_PREFIX ?? '',
  logger: { info() {}, warn: (msg, fields) => say({ warn: msg, ...fields }), error: (msg, fields) => say({ error: msg, ...fields }) },
});
bus
  .subscribe({ groupId, topics: [Topics.training], handler: async () => undefined })
  .then(() => say({ subscribed: true, pid: process.pid, ms: Date.now() - startedAt }))
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });
process.on('SIGTERM', () => void bus.close().then(() => process.exit(0)));
