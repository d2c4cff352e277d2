import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MessageOf, RobustrlMessage, TrajectoryWithTurns } from '@robustrl/contracts';
import type { ChaosJob, ChaosJobContext } from './chaos-job';
import { campaignChecks, tallyDecisions } from './campaign-checks';
import type { campaignTimings } from './campaign-settings';
import { classScorecard, LedgerRow } from './class-scorecard';
import type { ObservedEttr, ObservedSample } from './observed-ettr';
import type { PartitionSpan } from './cluster-invariants';
import type { Check, RoleRestart, StoredBatch } from './system-invariants';
import { getJson, InjectedFault, SystemScorecard } from './system-scorecard';
import { waitUntil } from './wait-until';

/** The ETTR the controller reports and the one observed from the processes, read together. */
export interface EttrAtEnd {
  ettr: number | null;
  summary: string;
  /** The ETTR ledger's rows (the controller's downtimeLedger): what each outage cost. */
  ledger: LedgerRow[];
  observed: ObservedEttr | null;
}

/**
 * The ETTR the controller reports at the end of a run. A controller killed late in the run may still be
 * rebuilding its views from the topics: it is asked again, for up to two minutes.
 */
export async function reportedEttr(controllerUrl: string, jobId: string): Promise<Omit<EttrAtEnd, 'observed'>> {
  const url = `${controllerUrl}/v1/jobs/${encodeURIComponent(jobId)}/ettr`;
  type Reported = { ettr: number | null; summary: string; downtimeLedger?: LedgerRow[] };
  const reported = await waitUntil('the controller to report the ETTR', () => getJson<Reported>(url).catch(() => undefined), 120_000, 2_000).catch(
    (err: unknown): Reported => ({ ettr: null, summary: `ETTR not read: ${String(err)}` }),
  );
  return { ettr: reported.ettr, summary: reported.summary, ledger: reported.downtimeLedger ?? [] };
}

/** What a campaign run left, as its scorecard reads it (system-chaos.ts gathers it). */
export interface RunRecord {
  seed: number;
  steps: number;
  policy: 'role-based' | 'task-restart';
  job: ChaosJob;
  ctx: ChaosJobContext;
  onHosts: boolean;
  jobId: string;
  /** The run's folder: the files the checks read are kept there, so a violation is explained from them. */
  dir: string;
  requestManagerUrl: string;
  events: readonly RobustrlMessage[];
  /** When this run's observer read each version's publication (event id → ms). */
  visibleAt: ReadonlyMap<string, number>;
  roleRestarts: readonly RoleRestart[];
  injected: readonly InjectedFault[];
  notes: readonly string[];
  planned: number;
  agentLoopsExit: number | null | undefined;
  committed: number;
  partitions: readonly PartitionSpan[];
  timings: ReturnType<typeof campaignTimings>;
  jobStartedAt: number;
  samples: readonly ObservedSample[] | null;
}

/** The scorecard of a finished run: its checks (campaign-checks.ts, the job's own) and what it cost. */
export async function scoreRun(run: RunRecord, finished: boolean, jobSeconds: number, ettr: EttrAtEnd): Promise<SystemScorecard> {
  const observed = ettr.observed;
  const batches = await storedBatches(run.requestManagerUrl, run.jobId, run.steps);
  // When each version became visible on the bus (this run's observer read it), not when the trainer
  // produced it: during a broker outage a trainer publishes versions nobody can see, let alone pull.
  const published = run.events
    .filter((m): m is MessageOf<'WeightVersionPublished'> => m.type === 'WeightVersionPublished')
    .map((m) => ({ version: m.data.version, at: run.visibleAt.get(m.eventId) ?? Date.parse(m.occurredAt) }));
  writeFileSync(join(run.dir, 'events.jsonl'), run.events.map((m) => JSON.stringify(m)).join('\n') + '\n');
  writeFileSync(join(run.dir, 'batches.json'), JSON.stringify(batches, null, 1));
  writeFileSync(join(run.dir, 'faults.json'), JSON.stringify(run.injected, null, 1));
  if (run.samples) writeFileSync(join(run.dir, 'observed.jsonl'), run.samples.map((x) => JSON.stringify(x)).join('\n') + '\n');
  const jobChecks = await run.job.checks(run.ctx, {
    events: [...run.events],
    batches,
    roleRestarts: [...run.roleRestarts],
    published,
    jobSeconds,
    reportedEttr: ettr.ettr,
    observedEttr: observed,
  });
  const checks: Check[] = campaignChecks({
    finished,
    agentLoopsExit: run.agentLoopsExit,
    jobSeconds,
    committed: run.committed,
    steps: run.steps,
    planned: run.planned,
    injected: run.injected,
    notes: run.notes,
    jobChecks,
    events: run.events,
    partitions: run.partitions,
    // A grace of the detection window after the heal: a verdict reached then is the partition's.
    partitionGraceMs: (run.timings.detection.agentSilentWindowSeconds + run.timings.detection.probeTimeoutSeconds) * 2000,
  });
  const { recoveries, decisionsByRule } = tallyDecisions(run.events);
  return {
    seed: run.seed,
    job: run.job.name,
    hosts: run.onHosts ? 'netns' : 'shared',
    policy: run.policy,
    jobId: run.jobId,
    jobSummary: run.job.summary(run.ctx),
    planned: run.planned,
    injected: [...run.injected],
    jobSeconds,
    stepsCommitted: run.committed,
    recoveries,
    decisionsByRule,
    retrainedSteps: run.job.retrainedSteps(run.ctx),
    regeneratedTrajectories: run.events.filter((m) => m.type === 'TrajectoryRestartedFromPrompt').length,
    evaluations: run.job.evaluations(run.ctx),
    ettr: ettr.ettr,
    observedEttr: observed?.ettr ?? null,
    downtime: ettr.summary,
    classes: classScorecard(
      run.injected.map((f) => ({ kind: f.kind, target: f.target, at: run.jobStartedAt + f.atSeconds * 1000 })),
      run.events,
      ettr.ledger,
    ),
    checks,
    ok: checks.every((c) => c.ok),
    runDir: run.dir,
  };
}

/** Every step's batch as the request manager stored it: its size and its completed trajectories. */
async function storedBatches(requestManagerUrl: string, jobId: string, steps: number): Promise<StoredBatch[]> {
  const out: StoredBatch[] = [];
  const base = `${requestManagerUrl}/v1/jobs/${encodeURIComponent(jobId)}/batches`;
  for (let step = 1; step <= steps; step++) {
    const progress = await getJson<{ total: number }>(`${base}/step-${step}`).catch(() => null);
    const completed = await getJson<{ trajectories: TrajectoryWithTurns[]; samples?: StoredBatch['samples'] }>(
      `${base}/step-${step}/completed?currentWeightVersion=${step - 1}&maxStaleness=1000000`,
    ).catch(() => null);
    if (progress && completed) out.push({ step, total: progress.total, completed: completed.trajectories, samples: completed.samples });
  }
  return out;
}
