import { request } from 'node:http';
import { ClassRow, formatClassScorecard } from './class-scorecard';
import { formatPlannedComparison, plannedAgainstUnplanned } from './planned-scorecard';
import type { FaultKind } from './fault-schedule';
import type { Check } from './system-invariants';

/** What a whole-system chaos campaign reports (system-chaos.ts), and its markdown. */
export interface InjectedFault {
  index: number;
  kind: FaultKind;
  target: string;
  /** Seconds since the job started. */
  atSeconds: number;
  /** Injected on top of the previous fault, without waiting for the system to settle (drawn so). */
  overlaps?: boolean;
  note?: string;
}

export interface SystemScorecard {
  seed: number;
  job: string;
  hosts: 'shared' | 'netns';
  policy: 'role-based' | 'task-restart';
  jobId: string;
  /** One line on the job itself (e.g. its evaluations). */
  jobSummary: string;
  planned: number;
  injected: InjectedFault[];
  jobSeconds: number;
  stepsCommitted: number;
  recoveries: Record<string, number>;
  decisionsByRule: Record<string, number>;
  /** Steps trained again after faults (from the job's record). */
  retrainedSteps: number;
  /** Trajectories generated again from their prompt (TrajectoryRestartedFromPrompt). */
  regeneratedTrajectories: number;
  /** [step, greedy pass rate] of the job's evaluations (the GRPO job's; none for the stand-in). */
  evaluations: Array<[number, number]>;
  ettr: number | null;
  /** The ETTR observed from the processes (observed-ettr.ts), where the job is observed (the GRPO job). */
  observedEttr: number | null;
  downtime: string;
  /** Per fault class: detection and recovery times, work and GPU time lost (class-scorecard.ts). */
  classes: ClassRow[];
  checks: Check[];
  ok: boolean;
  runDir: string;
}

/** GET a JSON body; rejects on a status of 300 or more, no answer within 10 s, or a body that is not JSON. */
export function getJson<T>(url: string): Promise<T> {
  return new Promise((done, fail) => {
    const req = request(url, { method: 'GET', timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if ((res.statusCode ?? 0) >= 300) return fail(new Error(`GET ${url}: ${res.statusCode} ${text.slice(0, 200)}`));
        try {
          done(JSON.parse(text) as T);
        } catch (err) {
          fail(err as Error);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: no answer within 10 s`)));
    req.on('error', fail);
    req.end();
  });
}

/** Runs of one seed side by side (fault-free, role-based recovery, task restarts), as a markdown table. */
export function formatSideBySide(cards: Array<{ label: string; card: SystemScorecard }>): string {
  const last = (c: SystemScorecard) => (c.evaluations.length ? c.evaluations[c.evaluations.length - 1][1].toFixed(2) : 'n/a');
  return [
    '| run | faults | ETTR (control plane) | ETTR (observed) | wall time (s) | steps committed | steps trained again | trajectories regenerated | last pass rate | invariants |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...cards.map(
      ({ label, card: c }) =>
        `| ${label} | ${c.injected.length} | ${c.ettr === null ? 'n/a' : c.ettr.toFixed(3)} | ${c.observedEttr === null ? 'n/a' : c.observedEttr.toFixed(3)} | ${c.jobSeconds} | ${c.stepsCommitted} | ${c.retrainedSteps} | ${c.regeneratedTrajectories} | ${last(c)} | ${
          c.ok
            ? 'all held'
            : c.checks
                .filter((k) => !k.ok)
                .map((k) => k.what)
                .join('; ')
        } |`,
    ),
  ].join('\n');
}

/** The scorecard as markdown. */
export function formatSystemScorecard(card: SystemScorecard): string {
  const lines = [
    `## seed ${card.seed}: ${card.ok ? 'PASS' : 'FAIL'}`,
    '',
    `${card.job} job ${card.jobId} (${card.hosts === 'netns' ? 'network-namespace hosts' : 'one shared host'}, ${card.policy} recovery): ` +
      `${card.stepsCommitted} steps committed in ${card.jobSeconds} s; ETTR ${card.ettr === null ? 'n/a' : card.ettr.toFixed(3)}; ` +
      `${card.retrainedSteps} step(s) trained again, ${card.regeneratedTrajectories} trajectory(ies) generated again from the prompt`,
    '',
    card.jobSummary,
    '',
    `downtime: ${card.downtime}`,
    '',
    `faults injected (${card.injected.length} of ${card.planned}):`,
    '',
    '| # | at (s) | fault | target | note |',
    '|---|---|---|---|---|',
    ...card.injected.map((f) => `| ${f.index + 1} | ${f.atSeconds} | ${f.kind}${f.overlaps ? ' (overlapping)' : ''} | ${f.target} | ${f.note ?? ''} |`),
    '',
    'per fault class (what happened from each injection until the next):',
    '',
    formatClassScorecard(card.classes ?? []),
    '',
    ...(plannedAgainstUnplanned(card.classes ?? []).length > 0 ? [formatPlannedComparison(plannedAgainstUnplanned(card.classes ?? [])), ''] : []),
    'decisions (action (rule): count): ' +
      Object.entries(card.decisionsByRule)
        .map(([k, n]) => `${k}: ${n}`)
        .join(', '),
    '',
    'recoveries completed: ' +
      Object.entries(card.recoveries)
        .map(([k, n]) => `${k} ${n}`)
        .join(', '),
    '',
    '| invariant | result | detail |',
    '|---|---|---|',
    ...card.checks.map((c) => `| ${c.what} | ${c.ok ? 'ok' : '**FAIL**'} | ${c.detail.replace(/\|/g, '\\|')} |`),
  ];
  return lines.join('\n');
}
