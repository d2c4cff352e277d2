import { BASELINE_WARMUP, ROLLOUT_ANSWERS, RecoveryLatencyResult, RecoveryLatencyRun } from '@robustrl/harness';

/**
 * The short version of `npm run bench:recovery-latency` (libs/harness/src/recovery-latency.ts): a broker and
 * PostgreSQL server of its own, the built detector and controller as their own processes (built by
 * `npm test` before jest), two synthetic jobs, four explicit faults. Timings are not asserted (they are
 * the benchmark's business); what is asserted is that the bench still measures what it says: every fault
 * is confirmed by the detector and answered by the controller at the rollout's level (the bench stopped
 * working unnoticed once when the controller's first answer to an exited engine changed), and every bare
 * route, the durable relay's writes included, carried its records.
 */
jest.setTimeout(5 * 60_000);

const FAULTS = 4;

describe('bench:recovery-latency, short (real Kafka and PostgreSQL of the test own, real service processes)', () => {
  let result: RecoveryLatencyResult;

  beforeAll(async () => {
    const run = new RecoveryLatencyRun({
      faults: FAULTS,
      faultsPerJob: 2,
      trainersPerJob: 2,
      gapMs: 20,
      telemetryMs: 1_000,
      progress: (line) => process.stderr.write(`[recovery-latency] ${line}\n`),
    });
    try {
      await run.start();
      result = await run.measure();
    } finally {
      await run.close();
    }
  });

  it('every fault signal is confirmed by the detector and answered by the controller without restarting the task', () => {
    expect(result.missed).toEqual([]);
    expect(result.samples).toHaveLength(FAULTS);
    expect(new Set(result.samples.map((s) => `${s.jobId}/${s.machineId}`)).size).toBe(FAULTS);
    for (const s of result.samples) {
      expect(ROLLOUT_ANSWERS.has(s.command)).toBe(true);
      // The verdict was seen on its topic between the signal and the command: the path went through the detector.
      expect(s.toDetectorMs).not.toBeNull();
      expect(s.detectorToControllerMs).not.toBeNull();
      expect(s.totalMs).toBeGreaterThan(0);
    }
  });

  it('every bare route carried each trip, and the durable relay committed one row per record it relayed', () => {
    for (const trips of [result.baselineMs, result.chainMs, result.relayMs, result.durableRelayMs]) {
      expect(trips).toHaveLength(FAULTS);
      for (const ms of trips) expect(ms).toBeGreaterThan(0);
    }
    expect(result.durableRelayRows).toBe(BASELINE_WARMUP + FAULTS);
  });
});
