import { DeciderRun } from '@robustrl/domain-kit';
import { Draft, isOneOf } from '@robustrl/contracts';
import { at, iso, published, timeline } from '@robustrl/testing/job-timeline';
import { DETECTOR_INPUT_TYPES, DetectorDecider, DetectorEvent } from '../detector.decider';

/**
 * The rollout-requests rule: the router's evidence of an engine's real requests finds a
 * wedged engine in seconds — even while the machine's agent answers every heartbeat — and never flags
 * an engine whose trajectories are all waiting on tools.
 */
const msg = timeline();
const job = msg(0, 'JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 2 });
const register = (machineId: string) =>
  msg(0, 'MachineRegistered', { machineId, role: 'rollout', zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `${machineId}:7070`, dpRank: 0 });
const observed = (s: number, machineId: string, r: { open?: number; idleFor?: number; failed?: number; succeeded?: number }) =>
  msg(s, 'RolloutRequestsObserved', {
    machineId,
    rolloutId: machineId,
    observedAt: iso(s),
    windowSeconds: 1,
    openRequests: r.open ?? 0,
    idleForMs: (r.idleFor ?? 0) * 1000,
    failedRequests: r.failed ?? 0,
    succeededRequests: r.succeeded ?? 0,
    lastFailure: r.failed ? 'stream cut: ECONNRESET' : null,
  });
/** The agent's GPU reports and its answers to any probe: the machine itself is alive throughout. */
const agentAlive = (machineId: string, until: number) =>
  Array.from({ length: Math.floor(until / 10) + 1 }, (_, i) =>
    msg(i * 10, 'GpuActivitySampled', { machineId, sampledAt: iso(i * 10), intervalSeconds: 10, tensorActive: 0.5, source: 'emulated' }),
  );

function run(history: DetectorEvent[], untilSeconds: number): Array<{ at: number; draft: Draft }> {
  const detector = DeciderRun.for(DetectorDecider, published()).given();
  const queue = [...history].sort((a, b) => Date.parse(a.occurredAt) - Date.parse(b.occurredAt));
  for (let s = 0; s <= untilSeconds; s += 1) {
    while (queue.length && Date.parse(queue[0].occurredAt) <= at(s)) {
      const m = queue.shift()!;
      if (isOneOf(m, DETECTOR_INPUT_TYPES)) detector.observe(m, Date.parse(m.occurredAt));
      else detector.fold(m);
      // Every probe is answered at once: the agent lives.
      for (const out of detector.emitted.splice(0)) {
        emitted.push(out);
        const d = out.output as Draft;
        if (d.type === 'HeartbeatProbeRequested')
          queue.unshift(msg(s, 'HeartbeatAcked', { probeId: d.data.probeId, machineId: d.data.machineId, ackedAt: iso(s) }));
      }
    }
    detector.tick(at(s));
    emitted.push(...detector.emitted.splice(0));
  }
  const out = emitted.map(({ now, output }) => ({ at: now, draft: output as Draft }));
  emitted.length = 0;
  return out;
}
const emitted: Array<{ now: number; output: unknown }> = [];
const confirmed = (drafts: Array<{ at: number; draft: Draft }>) => drafts.filter((d) => d.draft.type === 'FaultConfirmed');

describe('rollout-requests rule: the router’s evidence of real requests', () => {
  it('confirms an engine that produced no token for 10 s with requests open, though its agent answers every probe', () => {
    // Tokens flow until 20 s; then the engine hangs with 8 requests open. The router reports every second.
    const reports = Array.from({ length: 20 }, (_, i) => observed(21 + i, 'rollout-0', { open: 8, idleFor: i + 1 }));
    const drafts = run([job, register('rollout-0'), ...agentAlive('rollout-0', 60), observed(20, 'rollout-0', { open: 8, succeeded: 3 }), ...reports], 60);
    const verdicts = confirmed(drafts);
    expect(verdicts).toHaveLength(1);
    const v = verdicts[0].draft as Draft<'FaultConfirmed'>;
    expect(v.data).toMatchObject({ machineId: 'rollout-0', rule: 'rollout-requests', handledAs: 'rollout', machineFaulty: false, detectionLatencyMs: 10_000 });
    expect(verdicts[0].at).toBe(at(30));
    expect(v.data.evidence.detail).toContain('no token from the engine for 10 s with 8 request(s) open');
  });

  it('never flags an engine whose trajectories all wait on tools (no request open at it), for minutes', () => {
    const reports = Array.from({ length: 300 }, (_, i) => observed(1 + i, 'rollout-0', { open: 0 }));
    expect(confirmed(run([job, register('rollout-0'), ...agentAlive('rollout-0', 300), ...reports], 300))).toEqual([]);
  });

  it('never flags an engine whose queued requests wait behind running ones that progress', () => {
    // 40 requests open, the engine produced a token within the last second at every report.
    const reports = Array.from({ length: 120 }, (_, i) => observed(1 + i, 'rollout-0', { open: 40, idleFor: 0 }));
    expect(confirmed(run([job, register('rollout-0'), ...agentAlive('rollout-0', 120), ...reports], 120))).toEqual([]);
  });

  it('confirms after 3 failed requests in a row, and an answered request in between resets the count', () => {
    const failing = [observed(5, 'rollout-0', { failed: 1 }), observed(6, 'rollout-0', { failed: 1 }), observed(7, 'rollout-0', { failed: 1 })];
    const verdicts = confirmed(run([job, register('rollout-0'), ...agentAlive('rollout-0', 20), ...failing], 20));
    expect(verdicts.map((v) => (v.draft as Draft<'FaultConfirmed'>).data)).toEqual([
      expect.objectContaining({ machineId: 'rollout-0', rule: 'rollout-requests', evidence: expect.objectContaining({ observed: 3 }) }),
    ]);
    expect(verdicts[0].at).toBe(at(7));
    const recovering = [observed(5, 'rollout-0', { failed: 2 }), observed(6, 'rollout-0', { succeeded: 1 }), observed(7, 'rollout-0', { failed: 1 })];
    expect(confirmed(run([job, register('rollout-0'), ...agentAlive('rollout-0', 20), ...recovering], 20))).toEqual([]);
  });

  it('clears when the engine produces tokens again before the window (a long prefill, a hiccup)', () => {
    const reports = [
      ...Array.from({ length: 8 }, (_, i) => observed(1 + i, 'rollout-0', { open: 2, idleFor: i + 1 })),
      observed(9, 'rollout-0', { open: 2, idleFor: 0 }),
    ];
    const later = Array.from({ length: 5 }, (_, i) => observed(10 + i, 'rollout-0', { open: 2, idleFor: i + 1 }));
    expect(confirmed(run([job, register('rollout-0'), ...agentAlive('rollout-0', 30), ...reports, ...later], 30))).toEqual([]);
  });
});
