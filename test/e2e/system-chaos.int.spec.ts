import { SystemScorecard } from '../../bench/src/chaos/system-chaos';
import { runCampaignCommand } from './campaign-command';

/**
 * The short version of the whole-system chaos campaign (`npm run chaos`, bench/src/chaos/system-chaos.ts;
 * issue 14): every service, the machine host and its agents, and the Python reference job as processes
 * on a broker and PostgreSQL server of the test's own; one fault of each of five kinds — a trainer
 * process, an engine process, a rollout machine, a control-plane service, and the controller in the
 * middle of the recovery from a trainer fault. It runs as its user command (`node bench/dist/chaos-system.js`,
 * a child process that must exit when done); the campaign's invariants are asserted one by one from the
 * scorecard it wrote, so a failure names the one that broke. The full campaign (20+ faults, broker and
 * PostgreSQL restarts, three seeds) is `npm run chaos`.
 */
jest.setTimeout(15 * 60_000);

describe('whole-system chaos, short (every part a process, real Kafka and PostgreSQL of its own)', () => {
  let card: SystemScorecard;
  let code: number | null;

  beforeAll(async () => {
    const mix = {
      'kill-trainer-process': 1,
      'kill-engine-process': 1,
      'kill-rollout-machine': 1,
      'kill-service': 1,
      'kill-controller-mid-recovery': 1,
      'kill-trainer-machine': 0,
      'restart-broker': 0,
      'restart-postgres': 0,
    };
    const args = ['--job', 'reference', '--hosts', 'shared', '--seeds', '11', '--faults', '5', '--steps', '60', '--deadline', '600'];
    args.push(
      '--mix',
      Object.entries(mix)
        .map(([kind, w]) => `${kind}=${w}`)
        .join(','),
    );
    const run = await runCampaignCommand<SystemScorecard[]>('chaos-system.js', args, 14 * 60_000);
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
    expect(card.injected.map((f) => f.kind).sort()).toEqual(
      ['kill-controller-mid-recovery', 'kill-engine-process', 'kill-rollout-machine', 'kill-service', 'kill-trainer-process'].sort(),
    );
    expect(check('5 faults injected')).toMatchObject({ ok: true });
    expect(check('the job finished')).toMatchObject({ ok: true });
  });

  it.each([
    'every step trained exactly once and in order',
    'no trajectory lost or duplicated',
    'every turn stored once',
    'no engine served a version beyond the staleness bound',
    'no duplicate restart for one fault',
    'every confirmed fault ended in a completed recovery or an escalation with its rule',
  ])('%s', (what) => {
    expect(check(what)).toMatchObject({ ok: true });
  });

  it('the control plane answered the faults (recoveries completed) and the ETTR of the run is known', () => {
    expect(card.recoveries.recovered ?? 0).toBeGreaterThanOrEqual(3);
    expect(card.ettr).toBeGreaterThan(0);
    expect(card.ettr).toBeLessThanOrEqual(1);
  });
});
