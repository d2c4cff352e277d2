/**
 * The ETTR projection as it was before its accounting went incremental: every event accounted every
 * machine, and looked for the outage an idle machine waits on among every outage the job ever had. The
 * reference the incremental projection is held to (`ettr-incremental.spec.ts`), spec code only.
 *
 * Its view is the live one (../../ettr-view.ts) without what the incremental accounting keeps beside the
 * facts: no index, and machines without their bookkeeping (when each was accounted to, and how it
 * counts since). The categories, settings, outages, ledger rows, buckets and stage samples are the live
 * records. What it keeps of its own is what differs: accounting every machine on every event
 * (time-accounting.ts) and the fold that does so (ettr.projection.ts).
 */
import type { EttrView as LiveView, MachineView as LiveMachine } from '../../src/ettr-view';

export type { Bucket, DowntimeCategory, EttrSettings, LedgerEntry, Outage, StageSample } from '../../src/ettr-view';
export { DEFAULT_ETTR_SETTINGS, DOWNTIME_CATEGORIES } from '../../src/ettr-view';

/** A machine as the job knows it: the live record less the incremental accounting's bookkeeping. */
export type MachineView = Omit<LiveMachine, 'accountedTo' | 'countsAs' | 'countsGpus' | 'countsGenerating' | 'countsSide' | 'countsServing'>;

/** The ETTR read model of one job (see ../../ettr-view.ts), with no index. */
export interface EttrView extends Omit<LiveView, 'machines' | 'index'> {
  machines: Record<string, MachineView>;
}
