import { Logger } from '@nestjs/common';
import { PullGrantOpener, sameToken } from '@robustrl/bus';
import { DataOf } from '@robustrl/contracts';
import { describeShard } from './held-copies';
import { CatalogRequest } from './weight-server';

/** Assignments from this machine kept for granting catalogs: far more than pulls in flight at once. */
const MAX_REMEMBERED_ASSIGNMENTS = 100_000;

/**
 * The serving side's memory of the pulls the registry assigned with this machine as their source: whom
 * a shard's region may go to (weight-server.ts; docs/integrators/weights.md "Who may read what"), and with
 * identity on the token the puller must present.
 */
export class ServingGrants {
  private readonly assigned = new Map<string, { pullerId: string; version: number; shard: number; token: Buffer | null }>();

  constructor(
    private readonly machineId: string,
    private readonly logger: Logger,
    /** With identity on: opens the pull grants sealed for this machine (libs/bus/src/identity/pull-grants.ts). */
    private readonly grants: PullGrantOpener | undefined,
    private readonly catalogWaitMs: number,
    private readonly stopping: () => boolean,
  ) {}

  remember(a: DataOf<'WeightPullAssigned'>): void {
    let token: Buffer | null = null;
    if (this.grants) {
      // Any agent may write the weights topic; only the registry can seal a grant this machine opens.
      token = a.grant ? this.grants.open('source', a, a.grant.forSource) : null;
      if (!token) return void this.logger.warn(`ignoring pull ${a.pullId} to ${a.pullerId}: no grant this machine can open (not from the weight registry)`);
    }
    // Bounded: the oldest go first (a retired version's go with it, below).
    if (this.assigned.size >= MAX_REMEMBERED_ASSIGNMENTS) this.assigned.delete(this.assigned.keys().next().value!);
    this.assigned.set(a.pullId, { pullerId: a.pullerId, version: a.version, shard: a.shard ?? 0, token });
  }

  /** A retired version's assignments go with it. */
  forgetVersion(version: number): void {
    for (const [pullId, a] of this.assigned) if (a.version === version) this.assigned.delete(pullId);
  }

  /**
   * Whether a puller may have this machine's region of a shard: only for a pull the registry assigned
   * from here, to that puller, of that version and shard. The puller may ask before this machine has
   * read the assignment (both read the weights topic): it is waited for, as long as a puller waits for a catalog.
   */
  async grantFor(request: Omit<CatalogRequest, 'nonce'>): Promise<string | null> {
    const deadline = Date.now() + this.catalogWaitMs;
    const shard = request.shard ?? 0;
    for (;;) {
      const a = this.assigned.get(request.pullId);
      if (a) {
        if (a.pullerId !== request.pullerId || a.version !== request.version)
          return `pull ${request.pullId} was assigned to ${a.pullerId} for version ${a.version}, not to ${request.pullerId} for version ${request.version}`;
        if (a.shard !== shard) return `pull ${request.pullId} was assigned for ${describeShard(a.version, a.shard)}, not for shard ${shard}`;
        if (a.token && !(request.token && sameToken(a.token, request.token)))
          return `pull ${request.pullId} asked for without its grant's token: only ${a.pullerId} holds it`;
        return null;
      }
      if (this.stopping() || Date.now() >= deadline)
        return `the weight registry assigned no pull ${request.pullId} from ${this.machineId} to ${request.pullerId}`;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
