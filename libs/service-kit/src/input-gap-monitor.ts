import type { BusHealth } from '@robustrl/bus';
import type { InputGapReason } from '@robustrl/contracts';

/** A gap in a consumer's input: since when it cannot trust that it saw everything, and why. */
export interface InputGap {
  reason: InputGapReason;
  /** The last moment the input was known whole (the last healthy sample, or the newest input before a restart). */
  since: number;
  detail: string;
}

export type InputGapChange = { kind: 'opened'; gap: InputGap } | { kind: 'closed'; gap: InputGap; at: number };

/** What the monitor looks at: the bus's health for this consumer, and the newest input it was delivered. */
export interface InputSample {
  health: BusHealth;
  groupId: string;
  /** Event time (occurredAt) of the newest message delivered so far, null before the first. */
  newestInputAt: number | null;
}

/**
 * Tells when a consumer is blind to its input (docs/contributors/detection.md "Detection knows when it is blind"), from
 * periodic samples. Pure: time is an input, no I/O. Blind while
 *  - the broker is unreachable (`broker-unreachable`);
 *  - the consumer is stopped or not subscribed (`consumer-stopped`);
 *  - records wait (lag > 0) and the newest input read is older than `lagToleranceMs` — the consumer
 *    reads the past (`consumer-lag`);
 *  - it just started and has not yet seen itself caught up (`consumer-restart`, the initial gap).
 * A sample whose lag is unknown (the lag query failed) changes nothing: it is no evidence either way.
 * The gap closes on the first sample that is reachable, running and caught up.
 */
export class InputGapMonitor {
  private gap: InputGap | null;
  private lastWholeAt: number;

  /**
   * @param lagToleranceMs how old the newest input may be while records wait, before the consumer counts as behind.
   * @param startedAt the consumer's start; `blindSince` — when its input was last known whole (e.g. the newest
   *   message it had applied before a restart) — defaults to it.
   */
  constructor(
    private readonly lagToleranceMs: number,
    startedAt: number,
    blindSince: number = startedAt,
  ) {
    this.lastWholeAt = Math.min(blindSince, startedAt);
    this.gap = { reason: 'consumer-restart', since: this.lastWholeAt, detail: 'started; not yet caught up with its input' };
  }

  /** The open gap, null while the input is whole. */
  get current(): InputGap | null {
    return this.gap;
  }

  observe(sample: InputSample, now: number): InputGapChange | null {
    const verdict = blindness(sample, now, this.lagToleranceMs);
    if (verdict === 'unknown') return null;
    if (verdict === null) {
      this.lastWholeAt = now;
      if (this.gap === null) return null;
      const closed = this.gap;
      this.gap = null;
      return { kind: 'closed', gap: closed, at: now };
    }
    if (this.gap !== null) return null;
    this.gap = { ...verdict, since: this.lastWholeAt };
    return { kind: 'opened', gap: this.gap };
  }
}

/** Why the sample shows a blind consumer; null when it shows a whole input; 'unknown' when it cannot say. */
export function blindness(sample: InputSample, now: number, lagToleranceMs: number): Omit<InputGap, 'since'> | null | 'unknown' {
  const { health } = sample;
  if (!health.reachable) return { reason: 'broker-unreachable', detail: health.error ?? 'the broker does not answer' };
  const sub = health.subscriptions.find((s) => s.groupId === sample.groupId);
  if (!sub) return { reason: 'consumer-stopped', detail: `no subscription of ${sample.groupId}` };
  if (!sub.running) return { reason: 'consumer-stopped', detail: sub.error ?? `the consumer of ${sample.groupId} stopped` };
  if (sub.lag === null) return 'unknown';
  if (sub.lag === 0) return null;
  const age = sample.newestInputAt === null ? null : now - sample.newestInputAt;
  if (age !== null && age <= lagToleranceMs) return null;
  return {
    reason: 'consumer-lag',
    detail: `${sub.lag} record(s) waiting; the newest input read is ${age === null ? 'none yet' : `${Math.round(age / 1000)} s old`}`,
  };
}
