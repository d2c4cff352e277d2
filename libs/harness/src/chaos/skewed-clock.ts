/**
 * Preloaded into a campaign machine's agent (`node --require`): its wall clock is the host's plus the
 * number of milliseconds in ROBUSTRL_CHAOS_CLOCK_FILE, read again every half second, so the campaign can
 * step one machine's clock minutes off and back (degraded-faults.ts) as a broken NTP would. `Date` and
 * `Date.now` move; timers and `performance.now` do not (a wall-clock step does not move monotonic time).
 *
 * A stand-in for a machine with its own clock: every machine here shares one kernel (docs/contributors/chaos.md).
 */
import { readFileSync } from 'node:fs';

const file = process.env.ROBUSTRL_CHAOS_CLOCK_FILE;
if (file) {
  let offsetMs = 0;
  const read = () => {
    try {
      const value = Number(readFileSync(file, 'utf8').trim());
      offsetMs = Number.isFinite(value) ? value : 0;
    } catch {
      offsetMs = 0;
    }
  };
  read();
  setInterval(read, 500).unref();
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  class SkewedDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(realNow() + offsetMs);
      else super(...(args as [string | number | Date]));
    }
    static override now(): number {
      return realNow() + offsetMs;
    }
  }
  globalThis.Date = SkewedDate as DateConstructor;
}
