import { Command, InvalidArgumentError } from 'commander';
import { DEFAULT_TAIL_TOPICS, tail } from './tail';

const program = new Command()
  .name('robustrl')
  .description('robustrl: role-based fault tolerance for LLM RL post-training jobs');

program
  .command('tail')
  .description('follow robustrl topics and print one readable line per event (the audit trail)')
  .option('-t, --topic <topic...>', 'topics to follow (default: every robustrl topic and the dead-letter topic)')
  .option('-j, --job <jobId>', 'only this job (records are keyed by job id)')
  .option('--json', 'print one JSON object per record instead of a line', false)
  .option('-b, --from-beginning', 'start at the oldest retained record instead of now', false)
  .option('-n, --limit <count>', 'exit after printing this many records', (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer');
    return n;
  })
  .option('--brokers <list>', 'Kafka bootstrap servers, comma separated (default: $KAFKA_BROKERS)')
  .option('--topic-prefix <prefix>', 'topic prefix of the deployment (default: $ROBUSTRL_TOPIC_PREFIX)')
  .action(async (opts: { topic?: string[]; job?: string; json: boolean; fromBeginning: boolean; limit?: number; brokers?: string; topicPrefix?: string }) => {
    const brokers = (opts.brokers ?? process.env.KAFKA_BROKERS ?? '').split(',').map((b) => b.trim()).filter(Boolean);
    if (brokers.length === 0) {
      program.error('no Kafka brokers: pass --brokers host:port or set KAFKA_BROKERS (deploy/local/services.sh env prints the local one)');
    }
    const topics = (opts.topic ?? DEFAULT_TAIL_TOPICS).map((t) => (t.includes('.') ? t : `robustrl.${t}`));
    const session = await tail({
      brokers,
      topics,
      topicPrefix: opts.topicPrefix ?? process.env.ROBUSTRL_TOPIC_PREFIX ?? '',
      job: opts.job,
      json: opts.json,
      fromBeginning: opts.fromBeginning,
      limit: opts.limit,
      out: (line) => process.stdout.write(`${line}\n`),
      err: (line) => process.stderr.write(`${line}\n`),
    });
    const stop = async () => {
      await session.stop();
      process.exit(0);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    await session.done;
    await stop();
  });

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`robustrl: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
