/**
 * The ETTR projection as it was before its accounting went incremental: every event
 * accounted every machine, and looked for the outage an idle machine waits on among every outage the
 * job ever had. Kept, out of the build, as the reference the incremental projection is held to
 * (`ettr-incremental.spec.ts`): these files are the previous implementation, changed since only where
 * the definition changed (an idle machine waits only when no machine of the other side serves; see
 * `IdleWait` in ../ettr-view.ts), so that both keep computing the same thing.
 */
import type { DowntimeCategory, EttrView, MachineView } from './ettr-view';

/** Phases in which a rollout machine generates work a task restart would throw away. */
const GENERATING = new Set(['rollout', 'awaiting-tools']);

/**
 * What a machine's GPUs are doing right now: effective, or down for a reason an outage (or startup) owns.
 * `blocking` answers "which open outage is a machine of this role waiting on" (once per advance, not
 * once per machine: the outages of a long job are many, its machines thousands).
 */
export function classify(
  view: EttrView,
  m: MachineView,
  blocking: (m: MachineView) => Wait = (machine) => blockingOutage(view, machine),
): { category: DowntimeCategory; outageId: string | null } | null {
  if (m.heldBy) {
    // Verdict → restart ordered → the new process reports `initializing` → it reports work: restart, then re-initialisation.
    if (m.restartOrdered && m.phase === 'initializing' && m.reportedSinceRestart) return { category: 'reinitialization', outageId: m.heldBy };
    return { category: 'restart', outageId: m.heldBy };
  }
  if (m.phase === null || m.phase === 'initializing') return { category: 'startup', outageId: null };
  if (m.phase === 'idle') return blocking(m);
  return null;
}

type Wait = { category: 'waiting-on-dead-role' | 'startup'; outageId: string | null } | null;

/** What an idle machine counts as: waiting on an open outage of the other side (or a task restart) while none of that side serves, startup while none serves and none is down. */
function blockingOutage(view: EttrView, m: MachineView): Wait {
  const mine = m.role === 'rollout' ? 'rollout' : 'trainer';
  let members = 0;
  let serving = 0;
  for (const x of Object.values(view.machines)) {
    if ((x.role === 'rollout' ? 'rollout' : 'trainer') === mine) continue;
    members += 1;
    if (x.heldBy === null && x.phase !== null && x.phase !== 'initializing') serving += 1;
  }
  const noneServes = serving === 0;
  for (const o of Object.values(view.outages))
    if (o.closedAt === null && (o.taskRestart || (noneServes && o.handledAs !== mine))) return { category: 'waiting-on-dead-role', outageId: o.outageId };
  return noneServes && members > 0 ? { category: 'startup', outageId: null } : null;
}

function ledgerAdd(view: EttrView, category: DowntimeCategory, outageId: string | null, m: MachineView, gpuMs: number): void {
  if (gpuMs <= 0) return;
  const key = `${category}|${outageId ?? ''}|${m.machineId}`;
  const e = view.ledger[key];
  if (e) e.gpuMs += gpuMs;
  else view.ledger[key] = { category, outageId, machineId: m.machineId, role: m.role, gpuMs };
}

function bucketAt(view: EttrView, t: number) {
  const { sampleMs, maxBuckets } = view.settings;
  const start = (view.startedAt ?? 0) + Math.floor((t - (view.startedAt ?? 0)) / sampleMs) * sampleMs;
  const last = view.buckets[view.buckets.length - 1];
  if (last && last.startMs === start) return last;
  if (last && last.startMs > start) {
    // A retro-correction into the past: find the bucket (it may have been dropped already).
    return view.buckets.find((b) => b.startMs === start) ?? null;
  }
  // Fill gaps so the series has one bucket per sample period.
  let next = last ? last.startMs + sampleMs : start;
  while (next <= start) {
    view.buckets.push({ startMs: next, effectiveGpuMs: 0, totalGpuMs: 0 });
    next += sampleMs;
  }
  if (view.buckets.length > maxBuckets) view.buckets.splice(0, view.buckets.length - maxBuckets);
  return view.buckets[view.buckets.length - 1];
}

/** Splits [from, to) at bucket boundaries and applies `apply(bucket, ms)` to each piece. */
function overBuckets(view: EttrView, from: number, to: number, apply: (b: NonNullable<ReturnType<typeof bucketAt>>, ms: number) => void): void {
  const { sampleMs } = view.settings;
  const origin = view.startedAt ?? 0;
  let t = from;
  while (t < to) {
    const end = Math.min(to, origin + (Math.floor((t - origin) / sampleMs) + 1) * sampleMs);
    const b = bucketAt(view, t);
    if (b) apply(b, end - t);
    t = end;
  }
}

/** Accounts every machine's GPU time from the view's clock up to `to` (states are constant in between). */
export function advance(view: EttrView, to: number): void {
  if (view.startedAt === null || view.clock === null || to <= view.clock) {
    if (view.clock === null || to > view.clock) view.clock = to;
    return;
  }
  const from = view.clock;
  const dt = to - from;
  let effective = 0;
  let total = 0;
  // The outage a machine waits on depends only on its role: looked up at most twice per advance.
  const blockingByRole = new Map<string, Wait>();
  const blocking = (m: MachineView) => {
    const mine = m.role === 'rollout' ? 'rollout' : 'trainer';
    if (!blockingByRole.has(mine)) blockingByRole.set(mine, blockingOutage(view, m));
    return blockingByRole.get(mine) ?? null;
  };
  for (const m of Object.values(view.machines)) {
    const gpuMs = m.gpus * dt;
    total += gpuMs;
    const down = classify(view, m, blocking);
    if (down) {
      ledgerAdd(view, down.category, down.outageId, m, gpuMs);
      m.effectiveSince = null;
      continue;
    }
    effective += gpuMs;
    if (m.effectiveSince === null) m.effectiveSince = from;
    if (m.role !== 'trainer' && m.phase && GENERATING.has(m.phase)) {
      const last = m.atRisk[m.atRisk.length - 1];
      if (last && last[1] === from) last[1] = to;
      else m.atRisk.push([from, to]);
    }
  }
  view.effectiveGpuMs += effective;
  view.totalGpuMs += total;
  if (total > 0) {
    const share = effective / total;
    overBuckets(view, from, to, (b, ms) => {
      const machinesGpuMs = (total / dt) * ms;
      b.totalGpuMs += machinesGpuMs;
      b.effectiveGpuMs += machinesGpuMs * share;
    });
  }
  view.clock = to;
}

/**
 * Moves effective GPU time of one machine over [from, to) into the ledger after the fact: detection
 * (the verdict names the fault's start) and rollout work a task restart throws away.
 */
export function reclassify(view: EttrView, m: MachineView, from: number, to: number, category: DowntimeCategory, outageId: string | null): void {
  const start = Math.max(from, view.startedAt ?? from);
  if (to > view.clock!) to = view.clock!;
  if (to <= start) return;
  const gpuMs = m.gpus * (to - start);
  view.effectiveGpuMs -= gpuMs;
  ledgerAdd(view, category, outageId, m, gpuMs);
  overBuckets(view, start, to, (b, ms) => {
    b.effectiveGpuMs = Math.max(0, b.effectiveGpuMs - m.gpus * ms);
  });
}

/**
 * Adds GPU time of one machine over [from, to) that nothing accounted (it was not known yet) to the
 * total and the ledger under `category`: a machine of the job that registered after its start.
 */
export function chargeUnaccounted(view: EttrView, m: MachineView, from: number, to: number, category: DowntimeCategory): void {
  const start = Math.max(from, view.startedAt ?? from);
  if (to > view.clock!) to = view.clock!;
  if (to <= start) return;
  const gpuMs = m.gpus * (to - start);
  view.totalGpuMs += gpuMs;
  ledgerAdd(view, category, null, m, gpuMs);
  overBuckets(view, start, to, (b, ms) => {
    b.totalGpuMs += m.gpus * ms;
  });
}
