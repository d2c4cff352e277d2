/** What the infrastructure fault campaign (infra-chaos.ts) reports: per scenario and restart, and as a markdown table. */
export interface Check {
  what: string;
  ok: boolean;
  detail: string;
}

export interface ScenarioResult {
  name: string;
  seconds: number;
  /** Valid inputs the broker acknowledged during the scenario. */
  published: number;
  /** Of those, applied by the detector (in its inbox) by the end of the run. */
  handled: number;
  /** Of those, never applied: lost. */
  lost: number;
  deadLettered: number;
  verdicts: number;
  suspicions: number;
  checks: Check[];
  notes: string[];
}

export interface RestartMeasure {
  service: string;
  how: 'kill -9' | 'SIGTERM';
  /** Process start → its first input applied that it had not applied before. */
  toConsumingMs: number | null;
  /** Process start → GET /readyz 200. */
  toReadyMs: number | null;
}

export interface Scorecard {
  jobId: string;
  scenarios: ScenarioResult[];
  restarts: RestartMeasure[];
  /** Dead-letter copies per bad record (a record dead-lettered twice shows up here). */
  duplicateDeadLetters: number;
  ok: boolean;
}

/** Adds a check's outcome to a scenario's result. */
export const check = (r: ScenarioResult, what: string, ok: boolean, detail: string) => r.checks.push({ what, ok, detail });

/** The scorecard as a markdown table, one row per scenario, then the restarts. */
export function formatScorecard(card: Scorecard): string {
  const lines = [
    `| scenario | s | facts published | applied | dead-lettered | lost | verdicts | suspicions | checks |`,
    `|---|---:|---:|---:|---:|---:|---:|---:|---|`,
    ...card.scenarios.map(
      (r) =>
        `| ${r.name} | ${r.seconds} | ${r.published} | ${r.handled} | ${r.deadLettered} | ${r.lost} | ${r.verdicts} | ${r.suspicions} | ${r.checks.map((c) => `${c.ok ? '✓' : '✗'} ${c.what} (${c.detail})`).join('; ')}${r.notes.length ? `; ${r.notes.join('; ')}` : ''} |`,
    ),
    `| **total** | ${card.scenarios.reduce((n, r) => n + r.seconds, 0)} | ${sum(card.scenarios, 'published')} | ${sum(card.scenarios, 'handled')} | ${sum(card.scenarios, 'deadLettered')} | ${sum(card.scenarios, 'lost')} | ${sum(card.scenarios, 'verdicts')} | ${sum(card.scenarios, 'suspicions')} | duplicate dead letters: ${card.duplicateDeadLetters} |`,
    '',
    `| restart | how | start → consuming | start → ready |`,
    `|---|---|---:|---:|`,
    ...card.restarts.map((m) => `| ${m.service} | ${m.how} | ${fmt(m.toConsumingMs)} | ${fmt(m.toReadyMs)} |`),
  ];
  return lines.join('\n');
}

const sum = (rows: ScenarioResult[], key: 'published' | 'handled' | 'deadLettered' | 'lost' | 'verdicts' | 'suspicions') =>
  rows.reduce((n, r) => n + r[key], 0);
export const fmt = (ms: number | null) => (ms === null ? 'never' : `${(ms / 1000).toFixed(1)} s`);
