/**
 * The agent's lease on its trainer role (DESIGN §Recovery, fencing). A machine cut off from the broker
 * looks dead to the control plane, which replaces it (warm standby) once its agent stays silent past the
 * detection window and the probe. If the machine is alive on the other side of the cut, its trainer
 * would go on training beside its replacement: two trainers for one rank. So the agent holds its role
 * on a lease, renewed by every record the broker takes from it; once the lease runs out the agent stops
 * the role itself, before the control plane can have replaced it. When the broker takes its records
 * again, the agent says the role was stopped (`lease-expired`), and the control plane restarts it — or
 * ignores it, the machine having been replaced meanwhile.
 *
 * Pure: time is an input.
 */
/** Below the control plane's default agent-silent window plus its probe timeout (60 + 10 s). */
export const DEFAULT_AGENT_LEASE_SECONDS = 45;

export class BrokerLease {
  private lastContact: number;
  private expiredAt: number | null = null;

  /** `leaseMs` 0: no lease (the role is never stopped for a lost broker). */
  constructor(
    readonly leaseMs: number,
    now: number,
  ) {
    this.lastContact = now;
  }

  /** The broker took a record: the lease is renewed; `regained` once after it had run out. */
  renew(now: number): 'renewed' | 'regained' {
    this.lastContact = Math.max(this.lastContact, now);
    if (this.expiredAt === null) return 'renewed';
    this.expiredAt = null;
    return 'regained';
  }

  /** True exactly once, at the first check after the lease ran out (no record taken for `leaseMs`). */
  runsOut(now: number): boolean {
    if (this.leaseMs <= 0 || this.expiredAt !== null || now - this.lastContact < this.leaseMs) return false;
    this.expiredAt = now;
    return true;
  }

  get expired(): boolean {
    return this.expiredAt !== null;
  }

  /** How long the broker has taken nothing from this agent. */
  silenceMs(now: number): number {
    return Math.max(0, now - this.lastContact);
  }
}

/** What the guard does to the role it fences. */
export interface LeasedRole {
  /** The role is one the lease holds (trainer or hybrid) and its process runs. */
  held(): boolean;
  stop(): Promise<void>;
  /** Tells the control plane the role was stopped by its lease (an AgentFaultSignalled). */
  report(detail: string): Promise<void>;
  logger: { log(line: string): void; warn(line: string): void; error(line: string): void };
}

/** Checks the lease each second and stops the role when it runs out; reports it once the broker is back. */
export class RoleLeaseGuard {
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly lease: BrokerLease,
    private readonly role: LeasedRole,
  ) {}

  start(): void {
    if (this.lease.leaseMs > 0) this.timer = setInterval(() => void this.check(Date.now()), 1_000);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** The broker took one of the agent's records. */
  renewed(now = Date.now()): void {
    if (this.lease.renew(now) !== 'regained') return;
    this.role.logger.log('the broker takes records again: reporting the role stopped by its lease');
    void this.role
      .report(`the role process was stopped after ${this.lease.leaseMs / 1000} s without broker contact`)
      .catch((err: unknown) => this.role.logger.error(`could not report the lease: ${String(err)}`));
  }

  async check(now: number): Promise<void> {
    if (!this.role.held() || !this.lease.runsOut(now)) return;
    this.role.logger.warn(
      `lease expired: the broker took nothing from this agent for ${Math.round(this.lease.silenceMs(now) / 1000)} s (lease ${this.lease.leaseMs / 1000} s); ` +
        'stopping the role process so that it cannot train beside a replacement',
    );
    await this.role.stop();
  }
}
