import { createMessage, MessageOf, MessageType, RobustrlMessage, TrajectoryWithTurns } from '@robustrl/contracts';
import {
  CampaignFacts,
  checkInvariants,
  everyFaultEndedInRecoveryOrEscalation,
  LedgerRecord,
  noDuplicateRestartPerFault,
  noStaleServingBeyondBound,
  servedVersion,
  stepsTrainedOnceInOrder,
  StoredBatch,
  trajectoriesNeitherLostNorDuplicated,
  turnsStoredOnce,
} from './system-invariants';

/** A clean made-up run of 3 steps, 2 prompts each, 1 tool round; each test breaks it in one way. */
const job = { steps: 3, batchSize: 2, toolRounds: 1, maxStaleness: 1 };

function trajectory(step: number, k: number, version = Math.max(0, step - 2)): TrajectoryWithTurns {
  const id = `j/s${step}-p${k}/0`;
  const turn = (i: number, kind: 'tool-call' | 'tool-result' | 'model-output', content: unknown, weightVersion = 0) => ({
    turnId: `${id}#${i}`,
    turnIndex: i,
    kind,
    content,
    rolloutId: 'rollout-0',
    weightVersion,
    tokens: 4,
    spans: null,
    // Stored half a second after its version was published (version v at v seconds past the epoch).
    createdAt: new Date(version * 1000 + 500).toISOString(),
  });
  return {
    trajectoryId: id,
    jobId: 'j',
    batchId: `step-${step}`,
    step,
    promptId: `s${step}-p${k}`,
    sampleIndex: 0,
    prompt: [],
    ownerRolloutId: 'rollout-0',
    status: 'completed',
    attempt: 0,
    lastTurnIndex: 2,
    minWeightVersion: version,
    maxWeightVersion: version,
    weightVersions: [version],
    reward: null,
    metadata: null,
    createdAt: '2026-11-23T00:00:00.000Z',
    updatedAt: '2026-11-23T00:00:00.000Z',
    completedAt: '2026-11-23T00:00:00.000Z',
    turns: [
      turn(0, 'tool-call', { role: 'assistant', content: `v${version}: call`, tool_calls: [] }, version),
      turn(1, 'tool-result', { role: 'tool', content: 'r' }),
      turn(2, 'model-output', { role: 'assistant', content: `v${version}: done` }, version),
    ],
  };
}

function cleanFacts(): CampaignFacts {
  const ledger: LedgerRecord[] = [];
  const batches: StoredBatch[] = [];
  let at = 0;
  for (let s = 1; s <= job.steps; s++) {
    for (let k = 0; k < job.batchSize; k++) ledger.push({ kind: 'completed', at: at++, pid: 9, step: s, trajectoryId: `j/s${s}-p${k}/0`, turns: 2 });
    for (const rank of [0, 1]) ledger.push({ kind: 'trained', at: at++, pid: rank, step: s, rank, attempt: 0, trajectories: 2, stale: 0 });
    ledger.push({ kind: 'checkpoint', at: at++, pid: 0, step: s });
    batches.push({ step: s, total: 2, completed: [trajectory(s, 0), trajectory(s, 1)] });
  }
  // Version v published at v seconds past the epoch.
  return { job, ledger, batches, events: [], roleRestarts: [], published: [0, 1, 2].map((version) => ({ version, at: version * 1000 })) };
}

let seq = 0;
const msg = <T extends MessageType>(type: T, data: MessageOf<T>['data']): RobustrlMessage =>
  createMessage(type, data, { jobId: 'j', source: 'spec', occurredAt: new Date(Date.UTC(2026, 10, 23, 0, 0, seq++)).toISOString() });
const confirmed = (verdictId: string, machineId: string) =>
  msg('FaultConfirmed', {
    verdictId,
    machineId,
    role: 'trainer',
    rule: 'explicit-signal',
    evidence: { detail: 'trainer process killed by SIGKILL' },
    handledAs: 'trainer',
    machineFaulty: false,
    detectionLatencyMs: 5,
  });
const decided = (
  verdictId: string,
  recoveryId: string,
  action: MessageOf<'RecoveryDecided'>['data']['action'],
  rule: MessageOf<'RecoveryDecided'>['data']['rule'],
  detail = 'x',
) => msg('RecoveryDecided', { recoveryId, verdictId, machineId: 'trainer-0', action, rule, step: 2, evidence: { detail } });
const completedAs = (recoveryId: string, outcome: 'recovered' | 'escalated' | 'abandoned') =>
  msg('RecoveryCompleted', { recoveryId, outcome, stagesMs: { detect: 1, decide: 1, restart: 1, reconnect: 1 } });
const restartGroup = (recoveryId: string, commandId: string) =>
  msg('RestartTrainerGroup', { recoveryId, commandId, machines: ['trainer-0', 'trainer-1'], step: 2, checkpointStep: 1, keepBatch: true });

describe('the whole-system chaos invariants', () => {
  it('hold on a clean run', () => {
    const checks = checkInvariants(cleanFacts());
    expect(checks.filter((c) => !c.ok)).toEqual([]);
    expect(checks).toHaveLength(6);
  });

  describe('every step trained exactly once and in order', () => {
    it('a retried step before its commit is lost work, not a violation', () => {
      const f = cleanFacts();
      f.ledger.splice(3, 0, { kind: 'trained', at: 0, pid: 5, step: 1, rank: 0, attempt: 0, trajectories: 2, stale: 0 });
      expect(stepsTrainedOnceInOrder(f)).toMatchObject({ ok: true, detail: expect.stringMatching(/1 rank-step\(s\) trained again/) });
    });
    it('a step committed twice, out of order, or never', () => {
      const twice = cleanFacts();
      twice.ledger.push({ kind: 'checkpoint', at: 99, pid: 0, step: 2 });
      expect(stepsTrainedOnceInOrder(twice).detail).toMatch(/step 2 committed twice.*step 2 committed after step 3/);
      const never = cleanFacts();
      never.ledger = never.ledger.filter((r) => !(r.kind === 'checkpoint' && r.step === 3));
      expect(stepsTrainedOnceInOrder(never)).toMatchObject({ ok: false, detail: expect.stringMatching(/step 3 never committed/) });
    });
    it('a step committed on part of its batch is a violation; a trajectory its fetch excluded as stale is counted', () => {
      const f = cleanFacts();
      const trained = f.ledger.find((r) => r.kind === 'trained' && r.step === 2 && r.rank === 0)!;
      trained.trajectories = 1;
      trained.stale = 1;
      expect(stepsTrainedOnceInOrder(f)).toMatchObject({ ok: true, detail: expect.stringMatching(/1 trajectory\(ies\) excluded/) });
      trained.stale = 0;
      expect(stepsTrainedOnceInOrder(f)).toMatchObject({
        ok: false,
        detail: expect.stringMatching(/step 2 trained on 1 of 2 trajectories \(0 excluded as stale\)/),
      });
    });
  });

  describe('no trajectory lost or duplicated', () => {
    it('a prompt without a completed trajectory is lost', () => {
      const f = cleanFacts();
      f.batches[1].completed.pop();
      expect(trajectoriesNeitherLostNorDuplicated(f)).toMatchObject({ ok: false, detail: expect.stringMatching(/s2-p1 has no completed trajectory/) });
    });
    it('a second trajectory of one prompt, or one completed twice by the agent loops, is a duplicate', () => {
      const f = cleanFacts();
      f.batches[0].total = 3;
      f.batches[0].completed.push(trajectory(1, 0));
      f.ledger.push({ kind: 'completed', at: 99, pid: 9, step: 1, trajectoryId: 'j/s1-p0/0', turns: 2 });
      const check = trajectoriesNeitherLostNorDuplicated(f);
      expect(check.detail).toMatch(/step-1 holds 3 trajectories for 2 prompts/);
      expect(check.detail).toMatch(/s1-p0#0 completed more than once/);
      expect(check.detail).toMatch(/j\/s1-p0\/0 completed 2 times/);
    });
  });

  it('every turn stored once: a missing final turn, a gap and a repeated id are caught', () => {
    const f = cleanFacts();
    f.batches[0].completed[0].turns.pop();
    f.batches[1].completed[0].turns[1].turnIndex = 5;
    f.batches[2].completed[0].turns[2].turnId = f.batches[2].completed[0].turns[0].turnId;
    const check = turnsStoredOnce(f);
    expect(check.ok).toBe(false);
    expect(check.detail).toMatch(/s1-p0\/0: 1 model turns, the job makes 2/);
    expect(check.detail).toMatch(/s2-p0\/0: turn 1 has index 5/);
    expect(check.detail).toMatch(/s3-p0\/0: a turn id stored twice/);
  });

  describe('no engine served a version beyond the bound', () => {
    it('reads the version an engine wrote into its answer', () => {
      expect(servedVersion({ role: 'assistant', content: 'v12: hello' })).toBe(12);
      expect(servedVersion('v3: text')).toBe(3);
      expect(servedVersion({ role: 'assistant', content: null })).toBeNull();
    });
    it('a turn served two versions behind the newest published at a bound of one, and a turn tagged with a version its engine did not serve', () => {
      const f = cleanFacts();
      const late = trajectory(3, 0, 0);
      for (const u of late.turns) u.createdAt = '2026-11-23T00:00:00.000Z'; // long after version 2 was published
      f.batches[2].completed[0] = late;
      f.batches[1].completed[1].turns[0].weightVersion = 1; // the engine served 0
      const check = noStaleServingBeyondBound(f);
      expect(check.ok).toBe(false);
      expect(check.detail).toMatch(/s3-p0\/0#0: served with version 0 when 2 was published \(2 behind\)/);
      expect(check.detail).toMatch(/tagged version 1, the engine served 0/);
    });
    it('a publication while the answer was generated does not count against it', () => {
      const f = cleanFacts();
      const t = trajectory(3, 0, 0);
      for (const u of t.turns) u.createdAt = new Date(2_500).toISOString(); // version 2 came 0.5 s before: within the allowance
      f.batches[2].completed[0] = t;
      expect(noStaleServingBeyondBound(f).ok).toBe(true);
    });
  });

  describe('no duplicate restart for one fault', () => {
    it('one recovery restarting each member once holds', () => {
      const f = cleanFacts();
      f.events = [confirmed('v1', 'trainer-0'), decided('v1', 'r1', 'restart-trainer-group', 'trainer-fault'), restartGroup('r1', 'r1/1')];
      f.roleRestarts = [
        { machineId: 'trainer-0', recoveryId: 'r1', what: 'trainer' },
        { machineId: 'trainer-1', recoveryId: 'r1', what: 'trainer' },
      ];
      expect(noDuplicateRestartPerFault(f).ok).toBe(true);
    });
    it('a machine restarted twice for one command, and a fault given two recoveries, are caught', () => {
      const f = cleanFacts();
      f.events = [
        confirmed('v1', 'trainer-0'),
        decided('v1', 'r1', 'restart-trainer-group', 'trainer-fault'),
        decided('v1', 'r2', 'restart-trainer-group', 'trainer-fault'),
        restartGroup('r1', 'r1/1'),
      ];
      f.roleRestarts = [
        { machineId: 'trainer-0', recoveryId: 'r1', what: 'trainer' },
        { machineId: 'trainer-0', recoveryId: 'r1', what: 'trainer' },
      ];
      const check = noDuplicateRestartPerFault(f);
      expect(check.detail).toMatch(/fault v1 got 2 recoveries/);
      expect(check.detail).toMatch(/r1: trainer-0 restarted 2 time\(s\) for 1 command/);
    });
  });

  describe('every confirmed fault ended in a completed recovery or an escalation with its rule', () => {
    it('recovered, escalated under a rule, and covered by a completed recovery all hold', () => {
      const f = cleanFacts();
      f.events = [
        confirmed('v1', 'trainer-0'),
        decided('v1', 'r1', 'restart-trainer-group', 'trainer-fault'),
        confirmed('v2', 'trainer-1'),
        decided('v2', 'r2', 'report-only', 'covered-by-active-recovery', 'covered by r1 (restart-trainer-group)'),
        completedAs('r1', 'recovered'),
        confirmed('v3', 'trainer-0'),
        decided('v3', 'r3', 'restart-task', 'escalate-repeated-fault-in-step'),
        completedAs('r3', 'escalated'),
      ];
      expect(everyFaultEndedInRecoveryOrEscalation(f)).toMatchObject({
        ok: true,
        detail: expect.stringMatching(/3 confirmed faults: 1 recovered, 1 escalated.*1 covered/),
      });
    });
    it('a fault without a decision, a recovery that never completed or was abandoned, and a cover that never completed', () => {
      const f = cleanFacts();
      f.events = [
        confirmed('v1', 'trainer-0'),
        confirmed('v2', 'trainer-0'),
        decided('v2', 'r2', 'restart-trainer-group', 'trainer-fault'),
        confirmed('v3', 'trainer-1'),
        decided('v3', 'r3', 'report-only', 'covered-by-active-recovery', 'covered by r2 (restart-trainer-group)'),
        confirmed('v4', 'trainer-0'),
        decided('v4', 'r4', 'replace-rollout', 'rollout-fault'),
        completedAs('r4', 'abandoned'),
      ];
      const check = everyFaultEndedInRecoveryOrEscalation(f);
      expect(check.ok).toBe(false);
      expect(check.detail).toMatch(/fault v1 .* has no decision/);
      expect(check.detail).toMatch(/fault v2 .*r2 never completed/);
      expect(check.detail).toMatch(/fault v3: r2 never completed/);
      expect(check.detail).toMatch(/r4 ended abandoned/);
    });
  });
});
