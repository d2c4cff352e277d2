import { Logger } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { createMessage } from '@robustrl/contracts';
import { Departure, DepartureSource } from '@robustrl/orchestrator';
import { derivedEventId } from './recovery-executor';

/** Announcements remembered as sent; one per pod incarnation and cause, so a bound only matters on a huge, long-lived cluster. */
const REMEMBERED = 100_000;

export interface DepartureRelayOptions {
  intervalMs: number;
  clock?: () => number;
  logger?: Pick<Logger, 'log' | 'warn'>;
}

/**
 * Turns what the platform announces (the orchestrator's DepartureSource) into the evidence an agent's
 * notice is: a `node-draining` AgentFaultSignalled with the time left, which the detector confirms at
 * once and the controller plans from (docs/planned-failures.md, "Notices are evidence"). Each
 * announcement is sent once: its event id derives from its key, so a controller restarted, or a second
 * replica, sends the same record again and readers fold it once. A platform that cannot be read is
 * logged (once per distinct error) and read again at the next interval.
 */
export class DepartureRelay {
  /** What it publishes (the broker's ACLs must let the controller write its topic). */
  static readonly OUTPUT_TYPES = ['AgentFaultSignalled'] as const;
  private readonly sent = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private polling: Promise<void> | null = null;
  private lastError: string | null = null;
  private readonly clock: () => number;
  private readonly logger: Pick<Logger, 'log' | 'warn'>;

  constructor(
    private readonly bus: MessageBus,
    private readonly source: DepartureSource,
    private readonly options: DepartureRelayOptions,
  ) {
    this.clock = options.clock ?? Date.now;
    this.logger = options.logger ?? new Logger('departures');
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.poll(), this.options.intervalMs);
    this.timer.unref();
    void this.poll();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.polling;
  }

  /** One read of the platform; resolves with the announcements sent by it. One read at a time. */
  async poll(): Promise<Departure[]> {
    if (this.polling) return [];
    let sent: Departure[] = [];
    this.polling = (async () => {
      sent = await this.relay();
    })();
    try {
      await this.polling;
    } finally {
      this.polling = null;
    }
    return sent;
  }

  private async relay(): Promise<Departure[]> {
    let departures: Departure[];
    try {
      departures = await this.source.departures();
      this.lastError = null;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (message !== this.lastError) this.logger.warn(`cannot read the platform's departure notices (reading again): ${message}`);
      this.lastError = message;
      return [];
    }
    const sent: Departure[] = [];
    for (const d of departures) {
      if (this.sent.has(d.key)) continue;
      try {
        await this.bus.publish(this.signalOf(d));
      } catch (error) {
        // Not remembered: the next read sends it again.
        this.logger.warn(`could not send the notice for ${d.machineId} (sending again): ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      if (this.sent.size >= REMEMBERED) this.sent.clear();
      this.sent.add(d.key);
      sent.push(d);
      this.logger.log(
        `${d.jobId}/${d.machineId} (${d.role}) departs: ${d.reason}${d.departsAt === null ? ', no deadline' : `, in ${Math.round((d.departsAt - this.clock()) / 1000)} s`}`,
      );
    }
    return sent;
  }

  private signalOf(d: Departure) {
    const now = this.clock();
    const at = new Date(now).toISOString();
    return createMessage(
      'AgentFaultSignalled',
      {
        machineId: d.machineId,
        role: d.role,
        signal: 'node-draining',
        detail: `the platform announced the machine's departure: ${d.reason}`.slice(0, 4000),
        exitCode: null,
        observedAt: at,
        ...(d.departsAt === null ? {} : { departsInMs: Math.max(0, Math.round(d.departsAt - now)) }),
      },
      { jobId: d.jobId, source: 'controller/departures', occurredAt: at, eventId: derivedEventId(`departure/${d.jobId}/${d.key}`) },
    );
  }
}
