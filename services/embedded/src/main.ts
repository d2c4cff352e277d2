import { DEAD_LETTER_TOPIC, formatMessageLine, Topics } from '@robustrl/contracts';
import { fromDeadLetterRecord, InProcessBus, MessageBus } from '@robustrl/bus';
import { EVENT_STORE, MESSAGE_BUS, runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { ControllerModule } from '@robustrl/controller';
import { EMBEDDED_SERVICE_MODULES } from './embedded.module';
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
  const decided = new Set<string>();
  const printer = await bus.subscribe({
    groupId: `embedded-printer-${jobId}`,
    topics: Object.values(Topics),
    handler: async (d) => {
      if (d.message.jobId !== jobId || printed.has(d.message.eventId)) return;
      printed.add(d.message.eventId);
      if (['detector', 'controller', 'rollout-manager', 'weight-registry'].includes(d.message.source)) decided.add(d.message.type);
      log(`  ${formatMessageLine(d.message, d.topic)}`);
    },
  });

  log(`publishing ${story.length} scenario events, plus one malformed record on purpose (it must be dead-lettered, not crash anything)`);
  // The fault goes last, once the controller has seen the job get past its first iteration: topics
  // are ordered per job but not across topics, and a fault in the first iteration restarts the task.
  const fault = story[story.length - 1];
  for (const message of story.slice(0, -1)) await bus.publish(message);
  const controller = service.app.get(ControllerModule);
  await waitFor('the controller to see step 0 complete', 30_000, async () => controller.consumer.stateOf(jobId)?.firstIteration === false && Object.keys(controller.consumer.stateOf(jobId)?.machines ?? {}).length === 4);
  await bus.publish(fault);
  await bus.publishRaw({ topic: Topics.telemetry, key: jobId, value: '{"type":"GpuActivitySampled","data":"truncated by a broken exporter' });

  // The story ends with an ECC error on rollout-2: the detector must confirm it, the controller
  // decide to replace that machine, and the rollout manager move its trajectory — all on their own.
  // The weight registry has scheduled the first pull of the published version meanwhile.
  await waitFor('the control plane to detect the fault, decide the recovery and move the trajectory', 30_000, async () =>
    decided.has('ReplaceMachine') && decided.has('TrajectoriesReassigned') && decided.has('WeightPullAssigned') && story.every((m) => printed.has(m.eventId)),
  );
  await printer.close();
  const inLog = await logged(store, jobId);

  const deadLetters = bus instanceof InProcessBus ? bus.read(DEAD_LETTER_TOPIC).map(fromDeadLetterRecord).filter((d) => d.key === jobId) : [];
  log('');
  log('summary');
  log(`  events in the event log for ${jobId}: ${inLog} (${story.length} from the scenario, ${inLog - story.length} decided by the control plane; each stored once)`);
  log(`  the control plane decided: ${[...decided].join(', ')}`);
  if (bus instanceof InProcessBus) {
    log(`  dead letters: ${deadLetters.length} (${[...new Set(deadLetters.map((d) => d.reason.split(':')[0]))].join('; ')}), consumed by: ${deadLetters.map((d) => d.consumerGroup.replace('robustrl-', '')).sort().join(', ')}`);
  }
  log(`  ReplaceMachine waits for an orchestrator (ROBUSTRL_ORCHESTRATOR=kubernetes, or the local process supervisor in the end-to-end test); the emulated cluster arrives with the simulator milestone`);
  log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await service.stop();
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
