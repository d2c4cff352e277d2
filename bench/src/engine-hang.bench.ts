/**
 * `npm run bench:engine-hang` — how long a hung inference engine takes to be confirmed faulty
 * from the router's evidence of its real requests, against the paper's rollout rule alone.
 *
 *   node bench/dist/engine-hang.bench.js [--runs N] [--baseline-runs B] [--baseline-cap-s S]
 *   (env BENCH_RUNS, default 10; BENCH_BASELINE_RUNS, default 1; BENCH_BASELINE_CAP_S, default 90)
 *
 * Each run: two real llama.cpp servers (deploy/local/llama.sh: llama-server and the tiny model, built by
 * `llama.sh ensure`), the router in front of them with the production defaults (a 300 s upstream idle
 * timeout: the request timeout does not do the detecting), eight agent loops streaming chats through it,
 * and the detector's decider in this process with the production detection settings (10 s stall window,
 * 3 failed requests, 60 s silent window, 10 s probe). The machines' agents are alive throughout: they
 * report GPU activity and answer every heartbeat probe at once — the engine hangs, not the machine.
 * After 3 s of traffic one engine is SIGSTOPped (its sockets stay open and answer nothing, not even
 * /health). The clock runs from the signal to the detector's FaultConfirmed for that engine's machine.
 *
 *  - evidence: the router reports each engine's requests every second (RolloutRequestsObserved) and its
 *    throughput every 10 s (RolloutThroughputSampled), as RouterRuntime does.
 *  - baseline: the same without the request reports — the detector sees throughput only (the paper's
 *    rollout rule: 60 s of none, then a heartbeat probe, which the living agent answers). Capped at S s.
 *
 * Prints each run, then p50 / max of each mode and their ratio; a baseline that never confirmed within
 * the cap counts as the cap (a lower bound).
 */
import { DeciderRun } from '@robustrl/domain-kit';
import { createMessage, DataOf, Draft, isOneOf, MessageOf, MessageType, RobustrlMessage } from '@robustrl/contracts';
import { DETECTOR_INPUT_TYPES, DetectorDecider } from '@robustrl/detector-domain';
import { EnginePool, OpenAiRouter, RequestEvidence, requestsObserved, ThroughputMeter, throughputSampled } from '@robustrl/rollout-manager';
import { median, parseIntegerOptions } from './bench-kit';
import { LlamaEngine, startLlamaEngines } from '@robustrl/harness';

const JOB = 'job-engine-hang';
const LOOPS = 8;

const options = parseIntegerOptions(process.argv.slice(2), process.env, 'bench/dist/engine-hang.bench.js', {
  runs: { env: 'BENCH_RUNS', fallback: 10, min: 1, placeholder: 'N' },
  'baseline-runs': { env: 'BENCH_BASELINE_RUNS', fallback: 1, min: 0, placeholder: 'B' },
  'baseline-cap-s': { env: 'BENCH_BASELINE_CAP_S', fallback: 90, min: 10, placeholder: 'S' },
});

const log = (line: string) => process.stderr.write(`${line}\n`);
let eventSeq = 0;
const message = <T extends MessageType>(type: T, data: DataOf<T>, now: number): MessageOf<T> =>
  createMessage(type, data, {
    jobId: JOB,
    source: 'bench',
    occurredAt: new Date(now).toISOString(),
    eventId: `00000000-0000-4000-9000-${(++eventSeq).toString(16).padStart(12, '0')}`,
  });

interface RunResult {
  confirmedAfterMs: number | null;
  rule: string | null;
}

async function oneRun(mode: 'evidence' | 'baseline', capMs: number): Promise<RunResult> {
  const engines: LlamaEngine[] = await startLlamaEngines(2, { idPrefix: 'engine' });
  const pool = new EnginePool(
    engines.map((e) => ({ id: e.id, machineId: `m-${e.id}`, baseUrl: e.url, kind: 'llama.cpp' as const, weightVersion: 1 })),
    { probeIntervalMs: 5_000 },
  );
  const evidence = new RequestEvidence(Date.now());
  const meter = new ThroughputMeter(Date.now());
  const router = new OpenAiRouter({ pool, evidence, meter, logger: { info: () => undefined, warn: () => undefined, error: () => undefined } });
  const url = await router.listen(0, '127.0.0.1');
  pool.startProbing();

  const detector = DeciderRun.for(DetectorDecider, (d: Draft, now: number) => message(d.type, d.data as never, now) as RobustrlMessage).given();
  const feed = (m: RobustrlMessage, now: number): Draft[] => {
    const out = isOneOf(m, DETECTOR_INPUT_TYPES) ? (detector.observe(m, now) as Draft[]) : [];
    return out;
  };
  const verdicts: Array<{ at: number; draft: Draft<'FaultConfirmed'> }> = [];
  const handle = (drafts: Draft[], now: number) => {
    for (const d of drafts) {
      if (d.type === 'FaultConfirmed') verdicts.push({ at: now, draft: d as Draft<'FaultConfirmed'> });
      // The machines' agents live: every probe is answered at once.
      if (d.type === 'HeartbeatProbeRequested')
        handle(feed(message('HeartbeatAcked', { probeId: d.data.probeId, machineId: d.data.machineId, ackedAt: new Date(now).toISOString() }, now), now), now);
    }
  };
  const start = Date.now();
  handle(feed(message('JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 2 }, start), start), start);
  for (const e of engines) {
    const m = message(
      'MachineRegistered',
      { machineId: `m-${e.id}`, role: 'rollout', zone: 'z', hardwareClass: 'cpu', gpus: 1, agentAddress: 'x:1', dpRank: 0 },
      start,
    );
    handle(feed(m, start), start);
  }

  const timers: NodeJS.Timeout[] = [];
  const every = (ms: number, fn: () => void) => timers.push(setInterval(fn, ms));
  every(250, () => handle(detector.tick(Date.now()) as Draft[], Date.now()));
  every(10_000, () => {
    const now = Date.now();
    for (const e of engines)
      handle(
        feed(
          message(
            'GpuActivitySampled',
            { machineId: `m-${e.id}`, sampledAt: new Date(now).toISOString(), intervalSeconds: 10, tensorActive: 0.5, source: 'emulated' },
            now,
          ),
          now,
        ),
        now,
      );
    for (const s of meter.take(
      now,
      pool.snapshot().filter((e) => e.alive),
    )) {
      const m = message('RolloutThroughputSampled', throughputSampled(s, new Date(now).toISOString()), now);
      handle(feed(m, now), now);
    }
  });
  if (mode === 'evidence') {
    every(1_000, () => {
      const now = Date.now();
      for (const r of evidence.take(now, pool.snapshot())) {
        const m = message('RolloutRequestsObserved', requestsObserved(r, new Date(now).toISOString()), now);
        handle(feed(m, now), now);
      }
    });
  }

  // Agent loops: multi-turn chats, streamed, until the run ends.
  const stop = new AbortController();
  const loops = Array.from({ length: LOOPS }, async (_, i) => {
    const messages: Array<{ role: string; content: string }> = [{ role: 'user', content: `task ${i}` }];
    while (!stop.signal.aborted) {
      try {
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny', messages, stream: true, max_tokens: 48, temperature: 0.8 }),
          signal: stop.signal,
        });
        const text = await res.text();
        messages.push({ role: 'assistant', content: text.length > 0 ? 'ok' : '' }, { role: 'user', content: `next ${messages.length}` });
        if (messages.length > 7) messages.splice(1);
      } catch {
        // aborted at the end of the run, or an engine failed the request: go on
      }
    }
  });

  await new Promise((r) => setTimeout(r, 3_000));
  const victim = engines[0];
  const hungAt = Date.now();
  victim.hang();
  const victimMachine = `m-${victim.id}`;
  const deadline = hungAt + capMs;
  let result: RunResult = { confirmedAfterMs: null, rule: null };
  while (Date.now() < deadline) {
    const v = verdicts.find((x) => x.draft.data.machineId === victimMachine && x.at >= hungAt);
    if (v) {
      result = { confirmedAfterMs: v.at - hungAt, rule: v.draft.data.rule };
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const wrong = verdicts.filter((x) => x.draft.data.machineId !== victimMachine);
  if (wrong.length > 0) log(`  (a verdict on the healthy engine's machine: ${wrong.map((w) => w.draft.data.rule).join(', ')})`);

  stop.abort();
  for (const t of timers) clearInterval(t);
  for (const e of engines) {
    e.resume();
    e.kill();
  }
  await Promise.all(engines.map((e) => e.exited));
  await Promise.allSettled(loops);
  await router.close();
  await pool.stop();
  return result;
}

async function main(): Promise<void> {
  const capMs = options['baseline-cap-s'] * 1000;
  const evidenceRuns: number[] = [];
  const baselineRuns: number[] = [];
  log(`engine-hang: ${options.runs} run(s) with the router's request evidence, ${options['baseline-runs']} without (capped at ${options['baseline-cap-s']} s)`);
  for (let i = 0; i < options.runs; i++) {
    const r = await oneRun('evidence', capMs);
    if (r.confirmedAfterMs === null) throw new Error(`evidence run ${i + 1}: the hung engine was not confirmed within ${capMs} ms`);
    evidenceRuns.push(r.confirmedAfterMs);
    log(`  evidence run ${i + 1}: confirmed after ${(r.confirmedAfterMs / 1000).toFixed(2)} s by ${r.rule}`);
  }
  for (let i = 0; i < options['baseline-runs']; i++) {
    const r = await oneRun('baseline', capMs);
    baselineRuns.push(r.confirmedAfterMs ?? capMs);
    log(
      `  baseline run ${i + 1}: ${r.confirmedAfterMs === null ? `not confirmed within ${capMs / 1000} s` : `confirmed after ${(r.confirmedAfterMs / 1000).toFixed(2)} s by ${r.rule}`}`,
    );
  }
  const p50 = median(evidenceRuns);
  process.stdout.write(
    `hung engine → FaultConfirmed, router evidence: p50 ${(p50 / 1000).toFixed(2)} s, max ${(Math.max(...evidenceRuns) / 1000).toFixed(2)} s over ${evidenceRuns.length} runs\n`,
  );
  if (baselineRuns.length > 0) {
    const b = median(baselineRuns);
    process.stdout.write(
      `paper's rollout rule alone (throughput, probe answered): p50 ${b >= capMs ? `> ${capMs / 1000}` : (b / 1000).toFixed(2)} s over ${baselineRuns.length} run(s); ratio ${b >= capMs ? '<' : ''}${(p50 / b).toFixed(3)}\n`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`engine-hang: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
