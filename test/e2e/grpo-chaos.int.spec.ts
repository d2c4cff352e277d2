import { FAULT_KINDS, FaultKind, DEFAULT_GRPO_JOB, GrpoJob, formatSystemScorecard, runSystemChaos, SystemScorecard, NetnsHosts } from '@robustrl/harness';

/**
 * The short version of the campaign on the real job (`npm run chaos -- --job grpo`): the GRPO example
 * of examples/grpo — PyTorch training on two gloo ranks, two vLLM engines loading every version their
 * agents pull — under every part of robustrl as processes, each machine a network namespace of its own
 * (where the machine allows it: root), its trainer group formed by the agents. One engine killed
 * mid-stream, one trainer rank killed; the invariants of the real job are asserted one by one. The full
 * campaign (15+ faults, every kind, three seeds, the side-by-side ETTR) is `npm run chaos -- --job grpo`.
 */
jest.setTimeout(20 * 60_000);

/** Every kind off; the test turns on the two it injects. */
const ALL_OFF = Object.fromEntries(FAULT_KINDS.map((kind) => [kind, 0])) as Record<FaultKind, number>;

describe('the real GRPO job under whole-system chaos, short (torch, vLLM, network-namespace hosts)', () => {
  let card: SystemScorecard;

  beforeAll(async () => {
    card = await runSystemChaos({
      seed: 5,
      faults: 2,
      steps: 8,
      deadlineSeconds: 1_080,
      keep: process.env.CHAOS_KEEP === '1',
      job: new GrpoJob({ ...DEFAULT_GRPO_JOB, prompts: 8, groupSize: 8, evalEvery: 4, verifySamples: 24 }),
      hosts: NetnsHosts.unavailable() === null ? 'netns' : 'shared',
      weights: { ...ALL_OFF, 'kill-engine-process': 1, 'kill-trainer-process': 1 },
      // One after the other, each on a settled job: the assertions read each fault's recovery.
      overlap: 0,
      progress: (line) => process.stderr.write(`[grpo chaos] ${line}\n`),
    });
    process.stderr.write(`${formatSystemScorecard(card)}\n`);
  });

  const check = (prefix: string) => {
    const found = card.checks.find((c) => c.what.startsWith(prefix));
    if (!found) throw new Error(`no check '${prefix}' in the scorecard`);
    return found;
  };

  it('runs on hosts of their own where the machine allows, injects both faults, and the job finishes', () => {
    if (NetnsHosts.unavailable() === null) expect(card.hosts).toBe('netns');
    expect(card.injected.map((f) => f.kind).sort()).toEqual(['kill-engine-process', 'kill-trainer-process']);
    expect(card.injected.every((f) => f.target !== 'none')).toBe(true);
    expect(check('2 faults injected')).toMatchObject({ ok: true });
    expect(check('the job finished')).toMatchObject({ ok: true });
  });

  it('recovered each fault in place: a trainer group restart and an engine restart, no task restart', () => {
    expect(Object.keys(card.decisionsByRule).some((k) => k.startsWith('restart-trainer'))).toBe(true);
    expect(Object.keys(card.decisionsByRule).some((k) => k.startsWith('restart-rollout-engine'))).toBe(true);
    expect(Object.keys(card.decisionsByRule).some((k) => k.startsWith('restart-task'))).toBe(false);
  });

  it.each([
    'every step committed once, in order, trained on exactly the trajectories recorded for it',
    'no sample lost or duplicated',
    "after a restart every rank's parameters and optimizer state equal the checkpoint's",
    'every trained token was generated within the staleness bound',
    'every answer was produced by the version it is tagged with',
    'GPU activity measured from the processes, not a constant',
    'the job learned',
    'no duplicate restart for one fault',
    'every confirmed fault ended in a completed recovery or an escalation with its rule',
  ])('%s', (what) => {
    const found = check(what);
    expect(`${found.what}: ${found.detail}`).toBe(`${found.what}: ${found.ok ? found.detail : `FAILED — ${found.detail}`}`);
    expect(found.ok).toBe(true);
  });
});
