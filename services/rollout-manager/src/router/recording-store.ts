import { MessageBus } from '@robustrl/bus';
import { EventStore } from '@robustrl/store';
import { TRAJECTORY_STORE_MIGRATIONS, TrajectoryStore } from '@robustrl/trajectory-store';
import { StoreTrajectoryRecorder } from './store-trajectory-recorder';
import { ContinuationRequest, RecordedTurn, StoredPrefix, TrajectoryRecorder, TrajectoryStart } from './trajectory-recorder';

/**
 * The trajectory store's PostgreSQL as the router opens it, with two settings for its sessions whatever
 * the server's defaults:
 *  - synchronous commit: a turn the router acknowledged must survive the database's crash, which an
 *    asynchronous commit (a server tuned for speed, as deploy/local's is) would not promise;
 *  - no sequential scan where an index serves: every statement of the router looks rows up by key, and
 *    on a young table (no statistics until autoanalyze runs) the planner would scan it whole per batch;
 *  - generic plans for the prepared statements (the store prepares the router's open, append and read
 *    once per connection, libs/store/src/prepared-query.ts): they look rows up by key whatever the
 *    values, so planning each call again is cost with no better plan — PostgreSQL spent 0.23 ms of CPU
 *    a request with it and 0.19–0.20 without (bench:router, streamed at 64).
 * A setting the URL already names is left as given.
 */
export function recordingDatabaseUrl(url: string): string {
  const parsed = new URL(url);
  let options = parsed.searchParams.get('options') ?? '';
  if (!/synchronous_commit/.test(options)) options = `${options} -c synchronous_commit=on`;
  if (!/enable_seqscan/.test(options)) options = `${options} -c enable_seqscan=off`;
  if (!/plan_cache_mode/.test(options)) options = `${options} -c plan_cache_mode=force_generic_plan`;
  parsed.searchParams.set('options', options.trim());
  return parsed.toString();
}

/**
 * The store recorder, opened on first use and again after a failed open: a router whose database is
 * down or not migrated yet starts anyway, and answers recorded requests with 503 (ask again) until the
 * store opens — a broken dependency is waited for, never a crash (docs/contributors/delivery-guarantees.md).
 */
export class LazyStoreRecorder implements TrajectoryRecorder {
  private opening: Promise<{ store: EventStore; recorder: StoreTrajectoryRecorder }> | null = null;
  private lastFailure = 0;

  constructor(
    private readonly url: string,
    private readonly bus: MessageBus | undefined,
    private readonly options: { poolSize?: number; retryAfterMs?: number; onOpen?: () => void } = {},
  ) {}

  start(t: TrajectoryStart): Promise<void> {
    return this.recorder().then((r) => r.start(t));
  }

  appendTurns(turns: RecordedTurn[]): Promise<void> {
    return this.recorder().then((r) => r.appendTurns(turns));
  }

  prefix(trajectoryId: string): Promise<StoredPrefix> {
    return this.recorder().then((r) => r.prefix(trajectoryId));
  }

  open(t: TrajectoryStart): Promise<StoredPrefix> {
    return this.recorder().then((r) => r.open(t));
  }

  continueWith(trajectoryId: string, request: ContinuationRequest) {
    return this.recorder().then((r) => r.continueWith(trajectoryId, request));
  }

  /** Open it now (the router's start), without failing when it cannot be: the first request tries again. */
  warm(): Promise<boolean> {
    return this.recorder().then(
      () => true,
      () => false,
    );
  }

  async close(): Promise<void> {
    const opening = this.opening;
    this.opening = null;
    if (!opening) return;
    const opened = await opening.catch(() => null);
    if (!opened) return;
    await opened.recorder.close();
    await opened.store.close();
  }

  private async recorder(): Promise<StoreTrajectoryRecorder> {
    if (!this.opening) {
      const wait = this.lastFailure + (this.options.retryAfterMs ?? 1_000) - Date.now();
      if (this.lastFailure > 0 && wait > 0) throw new Error(`the trajectory store could not be opened; trying again in ${wait} ms`);
      this.opening = (async () => {
        const store = await EventStore.open(
          { kind: 'postgres', url: recordingDatabaseUrl(this.url), poolSize: this.options.poolSize ?? 8 },
          { migrations: TRAJECTORY_STORE_MIGRATIONS },
        );
        const trajectories = new TrajectoryStore(store, this.bus, { source: 'rollout-manager/router', publishInBackground: true, notify: 'ownership' });
        this.options.onOpen?.();
        return { store, recorder: new StoreTrajectoryRecorder(trajectories) };
      })();
      this.opening.catch(() => {
        this.opening = null;
        this.lastFailure = Date.now();
      });
    }
    return (await this.opening).recorder;
  }
}
