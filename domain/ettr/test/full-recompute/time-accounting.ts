/**
 * Accounting as the full-recompute ETTR projection does it (see ettr-view.ts): every event accounts every
 * machine, and an idle machine's wait is looked for among every outage the job ever had, by the
 * definition the live accounting keeps indexed (an idle machine waits only while no machine of the other
 * side serves; see `IdleWait` in ../../ettr-view.ts). The ledger, the sliding buckets and the
 * after-the-fact corrections (`reclassify`, `chargeUnaccounted`) are the live primitives
 * (../../time-accounting.ts), which read and write only the view's totals, series and ledger.
 */
import type { IdleWait } from '../../src/ettr-view';
import { GENERATING, ledgerAdd, overBuckets } from '../../src/time-accounting';
import type { DowntimeCategory, EttrView, MachineView } from './ettr-view';

/**
 * What a machine's GPUs are doing right now: effective, or down for a reason an outage (or startup) owns.
 * `blocking` answers "which open outage is a machine of this role waiting on" (once per advance, not
 * once per machine: the outages of a long job are many, its machines thousands).
 */
export function classify(
  view: EttrView,
  m: MachineView,
  blocking: (m: MachineView) => IdleWait = (machine) => blockingOutage(view, machine),
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

/** What an idle machine counts as: waiting on an open outage of the other side (or a task restart) while none of that side serves, startup while none serves and none is down. */
function blockingOutage(view: EttrView, m: MachineView): IdleWait {
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
  const blockingByRole = new Map<string, IdleWait>();
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
