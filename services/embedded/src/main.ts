import { JOB_ID, SEED, SPEEDUP, STEPS, TIMEOUT, VERBOSE } from './main-job-config';
import { DEAD_LETTER_TOPIC, MessageOf, RobustrlMessage, Topics, TopicName } from '@robustrl/contracts';
import { fromDeadLetterRecord, InProcessBus, MessageBus } from '@robustrl/bus';
import { createEttrProjection, describeDowntime, ETTR_INPUT_TYPES, EttrInput, ettrReport, slidingEttr, viewAt } from '@robustrl/ettr';
import { EVENT_STORE, MESSAGE_BUS, runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { EmulatedCluster, mainJobScenario } from '@robustrl/sim';
import { EventStore } from '@robustrl/store';
import { EMBEDDED_SERVICE_MODULES } from './embedded.module';
import { LiveClusterEnvironment, ScaledClock } from './scaled-time';

/**
 * `npm start`, the main job: the whole control plane in one process on embedded defaults (in-process bus,
 * PGlite) — detector, controller, request manager, rollout manager, weight registry — running a job on an
 * emulated cluster of agents in scaled time (`ROBUSTRL_SPEEDUP`, default 120: a second is two minutes of
 * the job). Faults are injected into the cluster: trainer processes are killed, a rollout machine
 * dies silently. Nothing tells the control plane what happened: the services detect, decide and command on
 * their own; the cluster carries the commands out as agents and an orchestrator would. Recoveries print as
 * they happen, then the job's ETTR report (from the same projection the controller serves).
 *
 * Settings: ROBUSTRL_SPEEDUP, ROBUSTRL_STEPS (default 8), ROBUSTRL_SEED (default 1), ROBUSTRL_JOB_ID;
 * KAFKA_BROKERS / DATABASE_URL run the same composition against real servers.
 */
async function main(): Promise<void> {
  const started = Date.now();
  const env = process.env;
  const speedup = SPEEDUP.read(env);
  const steps = Math.round(STEPS.read(env));
  const seed = Math.round(SEED.read(env));
  const jobId =
    JOB_ID.read(env) ??
    `job-${new Date()
      .toISOString()
      .replace(/[-:.TZ]/g, '')
      .slice(0, 14)}`;
  const scenario = mainJobScenario(steps);
  const clock = new ScaledClock(speedup);
  // The detector's rules run on every tick: tick every 5 s of job time, as the services do every second.
  env.ROBUSTRL_DETECTOR_TICK_SECONDS ??= String(5 / speedup);
  const config = { ...serviceConfigFromEnv('embedded', null), clock: () => clock.now() };
  log(`robustrl main job: the control plane in one process (bus=${config.bus.adapter}, store=${config.store.kind}), job ${jobId}`);
  log(`  emulated cluster: ${scenario.description}; ${steps} steps at ${speedup}x speed (seed ${seed})`);
  const service = await runService(config, EMBEDDED_SERVICE_MODULES, {
    logLevels: VERBOSE.read(env) ? ['log', 'warn', 'error'] : ['error'],
  });
  const bus = service.app.get<MessageBus>(MESSAGE_BUS);
  const store = service.app.get<EventStore>(EVENT_STORE);

  const world = new LiveClusterEnvironment(bus, jobId, clock);
  const t0 = clock.now();
  const at = (m: RobustrlMessage) => `[${hms(Date.parse(m.occurredAt) - t0)}]`;
  const projection = createEttrProjection({ windowMs: scenario.ettr.windowSeconds * 1000, sampleMs: scenario.ettr.sampleSeconds * 1000 });
  let view = projection.initialView();
  world.subscribe(ETTR_INPUT_TYPES, (m) => {
    view = projection.evolve(view, m as EttrInput);
  });
  const counts = new Map<string, number>();
  world.subscribe(null, (m) => {
    counts.set(m.source.split('/')[0], (counts.get(m.source.split('/')[0]) ?? 0) + 1);
    const line = storyLine(m);
    if (line) log(`  ${at(m)} ${line}`);
  });
  await world.start(Object.values(Topics) as TopicName[]);

  const cluster = new EmulatedCluster(world, scenario, seed, true);
  cluster.start();
  // Bad input is part of the story: a broken exporter's record must be dead-lettered, not block anything.
  await bus.publishRaw({ topic: Topics.telemetry, key: jobId, value: '{"type":"GpuActivitySampled","data":"truncated by a broken exporter' });

  const deadline = Date.now() + TIMEOUT.read(env) * 1000;
  let lastSteps = -1;
  let stopping = false;
  const stop = () => {
    stopping = true;
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  while (cluster.finishedAt === null && !stopping && world.failure === null) {
    if (Date.now() > deadline) throw new Error(`the job did not finish in ROBUSTRL_TIMEOUT_SECONDS (${cluster.stepsDone}/${steps} steps)`);
    if (cluster.stepsDone !== lastSteps) {
      lastSteps = cluster.stepsDone;
      log(`  [${hms(clock.now() - t0)}] progress: ${cluster.stepsDone}/${steps} steps trained`);
    }
    await sleep(100);
  }
  await world.stop();
  if (world.failure) throw world.failure;

  // Account to the end of the job and report.
  const end = cluster.finishedAt ?? clock.now();
  view = viewAt(view, end);
  const report = ettrReport(view);
  const sliding = slidingEttr(view);
  log('');
  log(stopping ? 'ETTR report (interrupted)' : 'ETTR report');
  log(
    `  job time ${hms(report.wallClockSeconds * 1000)} for ${cluster.stepsDone} steps on ${(scenario.cluster.trainerMachines + scenario.cluster.rolloutMachines) * scenario.cluster.gpusPerMachine} GPUs; faults injected: ${cluster.faultsInjected}, restarts carried out: ${cluster.restarts.length}`,
  );
  log(`  ETTR ${(report.ettr * 100).toFixed(1)} %  (effective ${report.effectiveGpuHours.toFixed(1)} of ${report.totalGpuHours.toFixed(1)} GPU-hours)`);
  if (sliding.length > 0)
    log(`  sliding ETTR (${scenario.ettr.windowSeconds / 60} min window): lowest ${(Math.min(...sliding.map((p) => p.ettr)) * 100).toFixed(1)} %`);
  log(`  ${describeDowntime(report)}`);
  for (const c of report.downtimeByCategory.filter((x) => x.gpuHours > 0)) log(`    ${c.category.padEnd(22)} ${c.gpuHours.toFixed(2)} GPU-hours`);
  for (const s of report.stages) {
    log(
      `  ${s.action ?? 'recovery'} ×${s.count}: detect ${sec(s.detect.mean)}, decide ${sec(s.decide.mean)}, restart ${sec(s.restart.mean)}, reconnect ${sec(s.reconnect.mean)} (mean)`,
    );
  }
  log(
    `  messages: ${[...counts.entries()]
      .sort()
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}; event log for ${jobId}: ${(await store.readJob(jobId, '0', 1_000_000)).length}`,
  );
  const deadLetters =
    bus instanceof InProcessBus
      ? bus
          .read(DEAD_LETTER_TOPIC)
          .map(fromDeadLetterRecord)
          .filter((d) => d.key === jobId)
      : [];
  if (bus instanceof InProcessBus)
    log(`  dead letters: ${deadLetters.length} (the malformed record, once however many consumer groups read it; nothing blocked)`);
  log(`  what the same faults would cost with whole-task restarts: robustrl simulate --scenario main-job`);
  log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await service.stop();
}

/** One line per event of the recovery story; the rest of the traffic is counted, not printed. */
function storyLine(m: RobustrlMessage): string | null {
  switch (m.type) {
    case 'FaultConfirmed': {
      const d = (m as MessageOf<'FaultConfirmed'>).data;
      return `detector: ${d.machineId} (${d.role}) confirmed faulty by ${d.rule} after ${sec(d.detectionLatencyMs)}${d.machineFaulty ? ', machine unusable' : ''}`;
    }
    case 'RecoveryDecided': {
      const d = (m as MessageOf<'RecoveryDecided'>).data;
      return d.action === 'report-only' ? null : `controller: ${d.action} for ${d.machineId} (rule ${d.rule}, step ${d.step})`;
    }
    case 'TrajectoriesReassigned': {
      const d = (m as MessageOf<'TrajectoriesReassigned'>).data;
      return `rollout manager: ${d.assignments.length} trajectories of ${d.fromRolloutId} continue elsewhere from their last stored turn`;
    }
    case 'MachineDeregistered': {
      const d = (m as MessageOf<'MachineDeregistered'>).data;
      return `orchestrator: ${d.machineId} left the job (${d.reason})`;
    }
    case 'RestartTrainerGroup': {
      const d = (m as MessageOf<'RestartTrainerGroup'>).data;
      return `controller: restart trainer group ${d.machines.join(', ')} in place from the step ${d.step} checkpoint, keeping its batch`;
    }
    case 'ReplaceMachine': {
      const d = (m as MessageOf<'ReplaceMachine'>).data;
      return `controller: replace ${d.role} machine ${d.machineId}`;
    }
    case 'RestartRolloutEngine': {
      const d = (m as MessageOf<'RestartRolloutEngine'>).data;
      return `controller: restart the rollout engine on ${d.machineId} in place (restart ${d.attempt} of ${d.budget} in the window)`;
    }
    case 'RecoveryCommandSucceeded': {
      const d = (m as MessageOf<'RecoveryCommandSucceeded'>).data;
      return d.newMachineId ? `orchestrator: ${d.newMachineId} scheduled and started` : null;
    }
    case 'RecoveryCompleted': {
      const d = (m as MessageOf<'RecoveryCompleted'>).data;
      const s = d.stagesMs;
      return `controller: recovery ${d.outcome} — detect ${sec(s.detect)}, decide ${sec(s.decide)}, restart ${sec(s.restart)}, reconnect ${sec(s.reconnect)}`;
    }
    default:
      return null;
  }
}

function hms(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return `${String(Math.floor(s / 3600)).padStart(2, '0')}:${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
}

function sec(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

main().catch((err: unknown) => {
  console.error(`robustrl main job failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
