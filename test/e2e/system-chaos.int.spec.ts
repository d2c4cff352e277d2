import { FAULT_KINDS, SystemScorecard, NetnsHosts } from '@robustrl/harness';
import { runCampaignCommand } from './campaign-command';

/**
 * The short version of the whole-system chaos campaign (`npm run chaos`,
 * libs/harness/src/chaos/system-chaos.ts): every service, the machine host and its agents, and the Python reference job as processes
 * on a broker and PostgreSQL server of the test's own; one fault of each of its kinds — a trainer
 * process, an engine process, a rollout machine, a control-plane service, the controller in the
 * middle of the recovery from a trainer fault, a rack (a trainer and rollouts at once) and machines lost
 * inside a recovery (the paper's rule 3) and, on network-namespace hosts (root), a trainer or rollout
 * machine cut off from everything and healed. It runs as its user command (`node bench/dist/chaos-system.js`,
 * a child process that must exit when done); the campaign's invariants are asserted one by one from the
 * scorecard it wrote, so a failure names the one that broke. The full campaign (20+ faults, broker and
 * PostgreSQL restarts, three seeds) is `npm run chaos`.
 */
jest.setTimeout(16 * 60_000);

/** Partitions need hosts of their own (network namespaces: root); without them the short campaign has none. */
const netns = NetnsHosts.unavailable() === null;
const kinds = [
  'kill-controller-mid-recovery',
  'kill-engine-process',
  'kill-rollout-machine',
  'kill-service',
  'kill-trainer-process',
  'rack',
  'machines-lost-during-recovery',
  ...(netns ? ['partition-full'] : []),
];

describe('whole-system chaos, short (every part a process, real Kafka and PostgreSQL of its own)', () => {
  let card: SystemScorecard;
  let code: number | null;

  beforeAll(async () => {
    // Every kind off but the short test's: a kind added to the campaign does not join it unnoticed.
    const mix = {
      ...Object.fromEntries(FAULT_KINDS.map((kind) => [kind, 0])),
      ...Object.fromEntries(kinds.map((kind) => [kind, 1])),
    };
    // Each fault once, on a settled system (overlaps are the full campaign's): the rows can be read one by one.
    const args = [
      '--job',
      'reference',
      '--hosts',
      netns ? 'netns' : 'shared',
      '--seeds',
      '11',
      '--faults',
      String(kinds.length),
      '--steps',
      '80',
      '--deadline',
      '900',
    ];
    args.push('--overlap', '0');
    args.push(
      '--mix',
      Object.entries(mix)
        .map(([kind, w]) => `${kind}=${w}`)
        .join(','),
    );
    const run = await runCampaignCommand<SystemScorecard[]>('chaos-system.js', args, 15 * 60_000);
    [card] = run.result;
    code = run.code;
  });

  it('runs as `npm run chaos` does and exits when done, with the code of its verdict', () => {
    expect(code).toBe(card.ok ? 0 : 1);
  });

  const check = (prefix: string) => {
    const found = card.checks.find((c) => c.what.startsWith(prefix));
    if (!found) throw new Error(`no check '${prefix}' in the scorecard`);
    return found;
  };

  it('injects every planned fault, and the job finishes', () => {
    expect(card.injected.map((f) => f.kind).sort()).toEqual([...kinds].sort());
    expect(check(`${kinds.length} faults injected`)).toMatchObject({ ok: true });
    expect(check('the job finished')).toMatchObject({ ok: true });
  });

  it.each([
    'every step trained exactly once and in order',
    'no trajectory lost or duplicated',
    'every turn stored once',
    'no engine served a version beyond the staleness bound',
    'no duplicate restart for one fault',
    'every confirmed fault ended in a completed recovery or an escalation with its rule',
    'no recovery loop (every machine restarted within its budget)',
    'every escalation names its rule and the evidence',
    'never two live trainers for one rank (no split brain)',
    'every partition healed with no recovery or ended in one recovery, never both',
  ])('%s', (what) => {
    expect(check(what)).toMatchObject({ ok: true });
  });

  it('a rack is recovered role by role; machines lost inside a recovery re-plan it at once, and its second failed restart escalates by rule 3', () => {
    const rack = card.classes.find((c) => c.kind === 'rack')!;
    expect(rack.decisions['trainer-machine-faulty']).toBeGreaterThanOrEqual(1);
    expect(Object.keys(rack.decisions).some((rule) => rule.startsWith('escalate-'))).toBe(false);
    const inside = card.classes.find((c) => c.kind === 'machines-lost-during-recovery')!;
    expect(inside.decisions['escalate-restart-failed-twice']).toBe(1);
    // Re-planned and escalated on the machines' verdicts, not at a command timeout (the product's, over the
    // time scale: 120 s). The recovery's own time also counts the task restart rule 3 leads to.
    expect(inside.decideSeconds!.max).toBeLessThan(120);
  });

  it('the control plane answered the faults (recoveries completed) and the ETTR of the run is known', () => {
    expect(card.recoveries.recovered ?? 0).toBeGreaterThanOrEqual(3);
    expect(card.ettr).toBeGreaterThan(0);
    expect(card.ettr).toBeLessThanOrEqual(1);
  });
});
