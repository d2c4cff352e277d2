import type { Bucket, DowntimeCategory, EttrIndex, EttrView, IdleWait, LedgerEntry, MachineView, Outage } from './ettr-view';

/** Phases in which a rollout machine generates work a task restart would throw away. */
export const GENERATING: ReadonlySet<string> = new Set(['rollout', 'awaiting-tools']);

/**
 * What the accounting primitives at the end of this file (`ledgerAdd`, `overBuckets`, `reclassify`,
 * `chargeUnaccounted`) read and write of a view and a machine: the clock, totals, sliding series and
 * ledger, never the machine table or the index, so the full-recompute reference the specs hold the
 * projection to accounts with them too.
 */
type Accounts = Pick<EttrView, 'settings' | 'startedAt' | 'clock' | 'effectiveGpuMs' | 'totalGpuMs' | 'ledger' | 'buckets'>;
type Accounted = Pick<MachineView, 'machineId' | 'role' | 'gpus'>;

/*
 * Incremental accounting. Between two events every machine counts the same way, so the
 * job's GPU time over the gap is (GPUs) × gap and its effective time (effective GPUs) × gap: `advance`
 * adds those from the index's totals. A machine's own share (its ledger rows, `effectiveSince`,
 * `atRisk`) is written when it is about to change (`settle`: from `accountedTo` to the clock, as it
 * counted) and its new way of counting is taken then (`recount`). An idle machine counts by the
 * wait of its side (`IdleWait`: the other side's open outages and serving machines), so when that wait
 * changes the idle machines of the side are recounted.
 * The result is the same as accounting every machine on every event (`domain/ettr/test/full-recompute/`, held to it
 * by `ettr-incremental.spec.ts`): GPU-milliseconds are whole numbers, so the sums do not depend on
 * how the time is split.
 */

export function emptyIndex(): EttrIndex {
  return {
    open: new Map(),
    waits: { trainer: null, rollout: null },
    members: { trainer: 0, rollout: 0 },
    serving: { trainer: 0, rollout: 0 },
    held: new Map(),
    idle: new Set(),
    trainers: new Set(),
    gpus: 0,
    effectiveGpus: 0,
  };
}

/** What a machine's GPUs are doing right now: effective (null), or down for a reason an outage (or startup) owns. */
function classify(index: EttrIndex, m: MachineView): { category: DowntimeCategory; outageId: string | null } | null {
  if (m.heldBy) {
    // Verdict → restart ordered → the new process reports `initializing` → it reports work: restart, then re-initialisation.
    if (m.restartOrdered && m.phase === 'initializing' && m.reportedSinceRestart) return { category: 'reinitialization', outageId: m.heldBy };
    return { category: 'restart', outageId: m.heldBy };
  }
  if (m.phase === null || m.phase === 'initializing') return { category: 'startup', outageId: null };
  if (m.phase === 'idle') return index.waits[sideOf(m)];
  return null;
}

type Side = 'trainer' | 'rollout';
const SIDES: readonly Side[] = ['trainer', 'rollout'];
const sideOf = (m: MachineView): Side => (m.role === 'rollout' ? 'rollout' : 'trainer');
/** Serving: its GPUs can do its side's work (not held by an outage, past initialising). */
const serves = (m: MachineView) => m.heldBy === null && m.phase !== null && m.phase !== 'initializing';

/** What an idle machine of side `mine` counts as (see `IdleWait`). */
function waitOf(index: EttrIndex, mine: Side): IdleWait {
  const other: Side = mine === 'rollout' ? 'trainer' : 'rollout';
  const noneServes = index.serving[other] === 0;
  for (const o of index.open.values())
    if (o.taskRestart || (noneServes && o.handledAs !== mine)) return { category: 'waiting-on-dead-role', outageId: o.outageId };
  return noneServes && index.members[other] > 0 ? { category: 'startup', outageId: null } : null;
}

const sameWait = (a: IdleWait, b: IdleWait) => a === b || (a !== null && b !== null && a.category === b.category && a.outageId === b.outageId);

/** Call after an outage opened, closed or became a task restart (or a side's serving machines changed): idle machines whose wait changed are recounted. */
export function outagesChanged(view: EttrView): void {
  const index = view.index;
  for (const o of index.open.values()) if (o.closedAt !== null) index.open.delete(o.outageId);
  const changed = new Set<Side>();
  for (const side of SIDES) {
    const wait = waitOf(index, side);
    if (sameWait(wait, index.waits[side])) continue;
    index.waits[side] = wait;
    changed.add(side);
  }
  if (changed.size === 0) return;
  for (const m of [...index.idle]) if (changed.has(sideOf(m))) recount(view, m);
}

export function openOutage(view: EttrView, o: Outage): void {
  view.index.open.set(o.outageId, o);
  outagesChanged(view);
}

/** Accounts `m` from `accountedTo` up to the clock, as it counted since then. Idempotent. */
export function settle(view: EttrView, m: MachineView): void {
  const to = view.clock;
  if (view.startedAt === null || to === null) return;
  const from = m.accountedTo ?? view.startedAt;
  if (to <= from) return;
  m.accountedTo = to;
  if (m.countsAs) {
    ledgerAdd(view, m.countsAs.category, m.countsAs.outageId, m, m.countsGpus * (to - from));
    m.effectiveSince = null;
    return;
  }
  if (m.effectiveSince === null) m.effectiveSince = from;
  if (m.countsGenerating) {
    const last = m.atRisk[m.atRisk.length - 1];
    if (last && last[1] === from) last[1] = to;
    else m.atRisk.push([from, to]);
  }
}

/** Settles `m` and takes how it counts from now on from its fields (call after changing them). */
export function recount(view: EttrView, m: MachineView): void {
  // A machine removed while an event was going through the machines (a ghost whose outage a task
  // restart closed) no longer counts, whatever is done to it after.
  if (view.machines[m.machineId] !== m) return;
  settle(view, m);
  const index = view.index;
  index.gpus -= m.countsGpus;
  if (m.countsAs === null) index.effectiveGpus -= m.countsGpus;
  m.countsAs = classify(index, m);
  m.countsGpus = m.gpus;
  m.countsGenerating = m.role !== 'trainer' && m.phase !== null && GENERATING.has(m.phase);
  index.gpus += m.countsGpus;
  if (m.countsAs === null) index.effectiveGpus += m.countsGpus;
  if (!m.heldBy && m.phase === 'idle') index.idle.add(m);
  else index.idle.delete(m);
  if (m.role !== 'rollout') index.trainers.add(m);
  else index.trainers.delete(m);
  const side = sideOf(m);
  const serving = serves(m);
  if (side === m.countsSide && serving === m.countsServing) return;
  uncountSide(index, m);
  m.countsSide = side;
  m.countsServing = serving;
  index.members[side] += 1;
  if (serving) index.serving[side] += 1;
  // The other side's idle machines may wait on this one's side now (or no longer).
  outagesChanged(view);
}

function uncountSide(index: EttrIndex, m: MachineView): void {
  if (m.countsSide === null) return;
  index.members[m.countsSide] -= 1;
  if (m.countsServing) index.serving[m.countsSide] -= 1;
  m.countsSide = null;
  m.countsServing = false;
}

/** A machine starts counting (as it is) from now. */
export function addMachine(view: EttrView, m: MachineView): void {
  view.machines[m.machineId] = m;
  m.accountedTo = view.clock;
  if (m.heldBy) heldSet(view.index, m.heldBy).add(m);
  recount(view, m);
}

/** A machine stops counting: accounted up to now, then gone. */
export function removeMachine(view: EttrView, m: MachineView): void {
  settle(view, m);
  const index = view.index;
  index.gpus -= m.countsGpus;
  if (m.countsAs === null) index.effectiveGpus -= m.countsGpus;
  m.countsGpus = 0;
  index.idle.delete(m);
  index.trainers.delete(m);
  if (m.heldBy) index.held.get(m.heldBy)?.delete(m);
  delete view.machines[m.machineId];
  uncountSide(index, m);
  outagesChanged(view);
}

/** Sets who holds `m` (settle it first); the caller recounts it. */
export function setHeldBy(view: EttrView, m: MachineView, outageId: string | null): void {
  if (m.heldBy === outageId) return;
  if (m.heldBy) view.index.held.get(m.heldBy)?.delete(m);
  m.heldBy = outageId;
  if (outageId && view.machines[m.machineId] === m) heldSet(view.index, outageId).add(m);
}

/** The machines an outage holds now. */
export function heldBy(view: EttrView, outageId: string): ReadonlySet<MachineView> {
  return view.index.held.get(outageId) ?? new Set();
}

function heldSet(index: EttrIndex, outageId: string): Set<MachineView> {
  let set = index.held.get(outageId);
  if (!set) index.held.set(outageId, (set = new Set()));
  return set;
}

/** Adds `gpuMs` of `m` to the ledger row of `category` and `outageId`. */
export function ledgerAdd(view: Accounts, category: DowntimeCategory, outageId: string | null, m: Accounted, gpuMs: number): void {
  if (gpuMs <= 0) return;
  const key = `${category}|${outageId ?? ''}|${m.machineId}`;
  const e = view.ledger[key];
  if (e) e.gpuMs += gpuMs;
  else view.ledger[key] = { category, outageId, machineId: m.machineId, role: m.role, gpuMs };
}

/**
 * The ledger with every machine's time up to the clock in (a reader's copy; the view is left as it is):
 * the rows of machines not settled since they last changed are what they will be once settled.
 */
export function ledgerEntries(view: EttrView): LedgerEntry[] {
  const rows = new Map(Object.entries(view.ledger));
  const to = view.clock;
  if (view.startedAt !== null && to !== null) {
    for (const m of Object.values(view.machines)) {
      const from = m.accountedTo ?? view.startedAt;
      if (!m.countsAs || to <= from || m.countsGpus <= 0) continue;
      const key = `${m.countsAs.category}|${m.countsAs.outageId ?? ''}|${m.machineId}`;
      const gpuMs = m.countsGpus * (to - from);
      const e = rows.get(key);
      rows.set(
        key,
        e ? { ...e, gpuMs: e.gpuMs + gpuMs } : { category: m.countsAs.category, outageId: m.countsAs.outageId, machineId: m.machineId, role: m.role, gpuMs },
      );
    }
  }
  return [...rows.values()];
}

/** Settles every machine (a view about to be read whole: `viewAt`, a step's end, a task restart). */
export function settleAll(view: EttrView): void {
  for (const m of Object.values(view.machines)) settle(view, m);
}

function bucketAt(view: Accounts, t: number) {
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
export function overBuckets(view: Accounts, from: number, to: number, apply: (b: Bucket, ms: number) => void): void {
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

/** Accounts the job's GPU time from the view's clock up to `to` (machines count the same way in between). */
export function advance(view: EttrView, to: number): void {
  if (view.startedAt === null || view.clock === null || to <= view.clock) {
    if (view.clock === null || to > view.clock) view.clock = to;
    return;
  }
  const from = view.clock;
  const dt = to - from;
  const total = view.index.gpus * dt;
  const effective = view.index.effectiveGpus * dt;
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
export function reclassify(view: Accounts, m: Accounted, from: number, to: number, category: DowntimeCategory, outageId: string | null): void {
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
export function chargeUnaccounted(view: Accounts, m: Accounted, from: number, to: number, category: DowntimeCategory): void {
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
