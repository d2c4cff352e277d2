import { DEAD_LETTER_TOPIC, formatMessageLine, RobustrlMessage, Topics, topicOf } from '@robustrl/contracts';
import { fromDeadLetterRecord, InProcessBus, MessageBus } from '@robustrl/bus';
import { EVENT_STORE, MESSAGE_BUS, runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { EMBEDDED_SERVICE_INPUTS, EMBEDDED_SERVICE_MODULES } from './embedded.module';
import { scriptedScenario } from './scripted-scenario';

/**
 * `npm start`: the whole control plane in one process on embedded defaults (in-process bus, PGlite),
 * driven by a short scripted scenario, printing every event as it flows, then a summary.
 * Set KAFKA_BROKERS / DATABASE_URL to run the same composition against real servers.
 */
async function main(): Promise<void> {
  const started = Date.now();
  const jobId = process.env.ROBUSTRL_JOB_ID ?? `demo-${new Date().toISOString().replace(/[-:.TZ]/g, '').slice(0, 14)}`;
  const config = serviceConfigFromEnv('embedded', null);
  log(`robustrl embedded control plane: bus=${config.bus.adapter}, store=${config.store.kind}, job=${jobId}`);
  // Nest's start-up chatter would bury the story; ROBUSTRL_VERBOSE=1 brings it back.
  const service = await runService(config, EMBEDDED_SERVICE_MODULES, {
    logLevels: process.env.ROBUSTRL_VERBOSE === '1' ? ['log', 'warn', 'error'] : ['error'],
  });
  const bus = service.app.get<MessageBus>(MESSAGE_BUS);
  const store = service.app.get<EventStore>(EVENT_STORE);

  const story = scriptedScenario(jobId, new Date());
  const printed = new Set<string>();
  const printer = await bus.subscribe({
    groupId: `embedded-printer-${jobId}`,
    topics: Object.values(Topics),
    handler: async (d) => {
      if (d.message.jobId !== jobId || printed.has(d.message.eventId)) return;
      printed.add(d.message.eventId);
      log(`  ${formatMessageLine(d.message, d.topic)}`);
    },
  });

  log(`publishing ${story.length} scenario events, plus one malformed record on purpose (it must be dead-lettered, not crash anything)`);
  for (const message of story) await bus.publish(message);
  await bus.publishRaw({ topic: Topics.telemetry, key: jobId, value: '{"type":"GpuActivitySampled","data":"truncated by a broken exporter' });

  await waitFor('every event printed and recorded', 30_000, async () => printed.size === story.length && (await logged(store, jobId)) === story.length);
  await printer.close();

  const deadLetters = bus instanceof InProcessBus ? bus.read(DEAD_LETTER_TOPIC).map(fromDeadLetterRecord).filter((d) => d.key === jobId) : [];
  log('');
  log('summary');
  log(`  events in the event log for ${jobId}: ${await logged(store, jobId)} (published ${story.length}; each stored once although ${countConsumers(story)} consumer deliveries recorded them)`);
  if (bus instanceof InProcessBus) {
    log(`  dead letters: ${deadLetters.length} (${[...new Set(deadLetters.map((d) => d.reason.split(':')[0]))].join('; ')}), consumed by: ${deadLetters.map((d) => d.consumerGroup.replace('robustrl-', '')).sort().join(', ')}`);
  }
  log(`  the detector and controller rules (verdicts, recoveries) are the next milestone; see the README roadmap`);
  log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await service.stop();
}

/** How many service-shell deliveries the story makes: each message reaches every service consuming its topic. */
function countConsumers(story: RobustrlMessage[]): number {
  return story.reduce((n, m) => n + EMBEDDED_SERVICE_INPUTS.filter((inputs) => inputs.includes(topicOf(m.type))).length, 0);
}

async function logged(store: EventStore, jobId: string): Promise<number> {
  return (await store.readJob(jobId, '0', 10_000)).length;
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

main().catch((err: unknown) => {
  console.error(`robustrl embedded run failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  process.exit(1);
});
