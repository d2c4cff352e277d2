/**
 * SIGTERM as a notice (docs/planned-failures.md). Kubernetes evicts a pod — a `kubectl drain`, a spot
 * node's shutdown, a preemption by a higher-priority pod — by sending SIGTERM and, after the pod's
 * termination grace period, SIGKILL. An agent told its grace period (`ROBUSTRL_AGENT_TERMINATION_GRACE_SECONDS`,
 * the pod's `terminationGracePeriodSeconds`) turns that SIGTERM into the machine's `node-draining`
 * signal with the time it has left, then keeps its roles running while the control plane moves them:
 * until they stop, or until shortly before the SIGKILL, when it shuts down as it always did.
 *
 * A SIGTERM is not a notice when the stop was expected: no role runs (the job finished, or never
 * started here), the control plane itself ordered this machine replaced, or the agent is already
 * stopping. Then the agent stops at once, as without a grace period.
 */
export interface TerminationNoticeOptions {
  /** The pod's grace period: SIGTERM to SIGKILL. 0: SIGTERM stops the agent at once (no notice). */
  graceMs: number;
  /** Whether a role (trainer process, engine, cooperating framework) runs here now. */
  rolesRunning: () => boolean;
  /** Why this stop was expected (the control plane's order, the agent already closing), or null. */
  expected: () => string | null;
  /** Report the machine's departure, `departsInMs` from now. */
  report: (detail: string, departsInMs: number) => Promise<void>;
  log: (line: string) => void;
  /** How often the wait looks at the roles (tests shorten it). */
  pollMs?: number;
  now?: () => number;
}

/** The part of the grace kept for the agent's own orderly stop: a tenth of it, at most 10 s. */
export function stopMarginMs(graceMs: number): number {
  return Math.min(10_000, Math.round(graceMs / 10));
}

export class TerminationNotice {
  private received: Promise<void> | null = null;

  constructor(private readonly o: TerminationNoticeOptions) {}

  /**
   * SIGTERM arrived. Resolves when the agent may stop: at once when no notice is due, else once the
   * roles stopped or the grace's end less the stop margin came. A second SIGTERM waits for the first.
   */
  terminate(): Promise<void> {
    this.received ??= this.handle();
    return this.received;
  }

  private async handle(): Promise<void> {
    const now = this.o.now ?? Date.now;
    const start = now();
    const graceMs = this.o.graceMs;
    if (graceMs <= 0) return;
    const expected = this.o.expected();
    if (expected !== null) return this.o.log(`SIGTERM: ${expected}; stopping now`);
    if (!this.o.rolesRunning()) return this.o.log('SIGTERM with no role running: stopping now');
    const seconds = Math.round(graceMs / 1000);
    await this.o
      .report(`SIGTERM: this machine is being evicted or drained (${seconds} s until SIGKILL)`, graceMs)
      .catch((err: unknown) => this.o.log(`SIGTERM: the notice could not be reported (${String(err)}); stopping before the grace ends anyway`));
    const until = start + graceMs - stopMarginMs(graceMs);
    this.o.log(`SIGTERM: reported node-draining; the roles keep running until they are moved or for ${Math.round((until - start) / 1000)} s`);
    const pollMs = this.o.pollMs ?? 500;
    while (this.o.rolesRunning() && now() < until) await sleep(Math.min(pollMs, Math.max(0, until - now())));
    this.o.log(this.o.rolesRunning() ? 'SIGTERM: the grace is nearly over; stopping the roles' : 'SIGTERM: the roles were moved; stopping');
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
