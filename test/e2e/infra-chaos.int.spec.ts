import { DEFAULT_CHAOS_OPTIONS, Scorecard } from '@robustrl/harness';
import { runCampaignCommand } from './campaign-command';

/**
 * The infrastructure's fault classes against the running control plane, with their stated durations: the same
 * campaign as `npm run chaos:infra` (libs/harness/src/chaos/infra-chaos.ts), run as that command
 * (`node bench/dist/chaos-infra.js`, a child process that must exit when done) — a broker and PostgreSQL
 * server of its own, the detector, controller and rollout manager as their own processes (built by
 * `npm test` before jest), a healthy job reporting every second. Each scenario's checks are asserted
 * one by one from the scorecard it wrote, so a failure names the class that broke.
 */
jest.setTimeout(20 * 60_000);

describe('infrastructure faults against the running services (real Kafka and PostgreSQL of the test own)', () => {
  let card: Scorecard;
  let code: number | null;

  beforeAll(async () => {
    ({ result: card, code } = await runCampaignCommand<Scorecard>('chaos-infra.js', [], 19 * 60_000));
  });

  it('runs as `npm run chaos:infra` does and exits when done, with the code of its verdict', () => {
    expect(code).toBe(card.ok ? 0 : 1);
  });

  const scenario = (prefix: string) => {
    const found = card.scenarios.find((s) => s.name.startsWith(prefix));
    if (!found) throw new Error(`no scenario '${prefix}' in the scorecard`);
    return found;
  };
  const failedChecks = (prefix: string) => scenario(prefix).checks.filter((c) => !c.ok);

  it('an oversized record at the broker limit: one dead-letter reference, the records after it handled', () => {
    expect(failedChecks('oversized record')).toEqual([]);
    expect(scenario('oversized record').deadLettered).toBe(1);
  });

  it('malformed records on every topic: one dead letter each, the partitions move on', () => {
    expect(failedChecks('malformed records')).toEqual([]);
  });

  it('PostgreSQL down a minute under steady load: nothing lost or dead-lettered, processing resumes by itself, /readyz false meanwhile', () => {
    const outage = scenario('PostgreSQL down');
    expect(failedChecks('PostgreSQL down')).toEqual([]);
    expect(outage.published).toBeGreaterThan(0);
    expect(outage).toMatchObject({ lost: 0, deadLettered: 0 });
  });

  it('the broker down 90 s: zero verdicts, /readyz false while down and true after, detection paused and resumed', () => {
    expect(failedChecks('broker down')).toEqual([]);
    expect(scenario('broker down')).toMatchObject({ verdicts: 0, suspicions: 0, lost: 0 });
  });

  it('a detector killed with kill -9 or stopped consumes again within 5 s of its start, losing nothing', () => {
    expect(failedChecks('detector killed')).toEqual([]);
    expect(failedChecks('detector stopped')).toEqual([]);
    for (const m of card.restarts.filter((r) => r.service === 'detector')) expect(m.toConsumingMs).toBeLessThanOrEqual(DEFAULT_CHAOS_OPTIONS.restartBudgetMs);
  });

  it('a detector started while the broker and PostgreSQL are down waits for them and consumes once they are back', () => {
    expect(failedChecks('detector started while')).toEqual([]);
  });

  it('restarting the controller and rollout manager writes no dead letter again; across the run one copy per bad record', () => {
    expect(failedChecks('controller and rollout manager')).toEqual([]);
    expect(card.duplicateDeadLetters).toBe(0);
  });

  it('an agent started after old commands for its machine id ignores them and carries out one for its incarnation', () => {
    expect(failedChecks('an agent started')).toEqual([]);
  });

  it('over the whole run: every published input applied, no false verdict, every check passed', () => {
    expect(card.scenarios.reduce((n, s) => n + s.lost, 0)).toBe(0);
    expect(card.scenarios.reduce((n, s) => n + s.verdicts, 0)).toBe(0);
    expect(card.scenarios.flatMap((s) => s.checks.filter((c) => !c.ok))).toEqual([]);
  });
});
