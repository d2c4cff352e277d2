import type { EngineView } from './engine-pool';
import { RequestEvidence } from './request-evidence';

const engine = (id: string): EngineView => ({
  id,
  machineId: `m-${id}`,
  baseUrl: 'http://x',
  kind: 'llama.cpp',
  weightVersion: 1,
  inFlight: 0,
  alive: true,
  leavesAt: null,
  stickyCount: 0,
  deadReason: null,
});
const engines = [engine('a'), engine('b')];

describe('RequestEvidence: what the router reports of each engine’s real requests', () => {
  it('an engine with open streams and no token since is idle for as long; a token resets it', () => {
    const evidence = new RequestEvidence(0);
    evidence.ended('a', { ok: true });
    evidence.take(1_000, engines);
    evidence.opened('a', 1_000);
    evidence.opened('a', 1_500);
    evidence.progressed('a', 2_000);
    expect(evidence.take(5_000, engines)).toEqual([
      { engineId: 'a', machineId: 'm-a', windowSeconds: 4, openRequests: 2, idleForMs: 3_000, failedRequests: 0, succeededRequests: 0, lastFailure: null },
    ]);
    evidence.progressed('a', 5_500);
    expect(evidence.take(6_000, engines)[0]).toMatchObject({ openRequests: 2, idleForMs: 500 });
  });

  it('idleness counts from when the engine got work, not from its last token of an earlier busy period', () => {
    const evidence = new RequestEvidence(0);
    evidence.opened('a', 0);
    evidence.progressed('a', 100);
    evidence.closed('a');
    evidence.ended('a', { ok: true });
    evidence.opened('a', 10_000);
    expect(evidence.take(10_400, engines)[0]).toMatchObject({ openRequests: 1, idleForMs: 400, succeededRequests: 1 });
  });

  it('an engine whose trajectories wait on tools (nothing open) is not reported; one that was idle is reported once more to clear', () => {
    const evidence = new RequestEvidence(0);
    expect(evidence.take(1_000, engines)).toEqual([]);
    evidence.ended('b', { ok: true });
    evidence.take(1_000, engines);
    evidence.opened('b', 1_000);
    expect(evidence.take(3_000, engines)[0]).toMatchObject({ engineId: 'b', idleForMs: 2_000 });
    evidence.closed('b');
    expect(evidence.take(4_000, engines)).toEqual([expect.objectContaining({ engineId: 'b', openRequests: 0, idleForMs: 0 })]);
    expect(evidence.take(5_000, engines)).toEqual([]);
  });

  it('an engine that never served since it joined is starting, not wedged: its refusals and silence are not reported', () => {
    const evidence = new RequestEvidence(0);
    evidence.ended('a', { ok: false, reason: 'connection failed: ECONNREFUSED' });
    evidence.ended('a', { ok: false, reason: 'engine answered 503' });
    evidence.opened('a', 0);
    expect(evidence.take(20_000, engines)).toEqual([]);
    evidence.progressed('a', 20_500);
    evidence.closed('a');
    evidence.ended('a', { ok: true });
    evidence.ended('a', { ok: false, reason: 'stream cut: ECONNRESET' });
    expect(evidence.take(21_000, engines)).toEqual([expect.objectContaining({ engineId: 'a', failedRequests: 1, succeededRequests: 1 })]);
    // It left the pool (its machine was replaced) and came back: starting again.
    evidence.take(22_000, [engines[1]]);
    evidence.ended('a', { ok: false, reason: 'connection failed: ECONNREFUSED' });
    expect(evidence.take(23_000, engines)).toEqual([]);
  });

  it('an engine that left the pool and joined again between two reports is starting again (a task restart, waiting for its weights)', () => {
    const evidence = new RequestEvidence(0);
    evidence.ended('a', { ok: true });
    expect(evidence.take(1_000, engines)).toHaveLength(1);
    // Its machine's new agent holds no weights yet: it leaves the pool, joins it again once it pulled,
    // and its engine answers 503 until it loaded them — all within one report window.
    evidence.left('a');
    for (let i = 0; i < 5; i++) evidence.ended('a', { ok: false, reason: 'engine answered 503' });
    expect(evidence.take(2_000, engines)).toEqual([]);
  });

  it('counts failures with the last reason and answers per window', () => {
    const evidence = new RequestEvidence(0);
    evidence.progressed('a', 0);
    evidence.ended('a', { ok: false, reason: 'connection failed: ECONNREFUSED' });
    evidence.ended('a', { ok: false, reason: 'no bytes for 2000 ms' });
    evidence.ended('b', { ok: true });
    expect(evidence.take(1_000, engines)).toEqual([
      expect.objectContaining({ engineId: 'a', failedRequests: 2, succeededRequests: 0, lastFailure: 'no bytes for 2000 ms' }),
      expect.objectContaining({ engineId: 'b', failedRequests: 0, succeededRequests: 1, lastFailure: null }),
    ]);
    expect(evidence.take(2_000, engines)).toEqual([]);
  });
});
