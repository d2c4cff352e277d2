import { isInfrastructureError } from './errors';
import { BusLogger } from './message-bus';

export interface WaitOptions {
  logger: BusLogger;
  /** Stop waiting (and rethrow the last failure) once this says so, e.g. the bus or process is closing. */
  cancelled?: () => boolean;
  initialDelayMs?: number;
  maxDelayMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * Runs `attempt` until it succeeds while its failures are the infrastructure's (docs/contributors/delivery-guarantees.md:
 * the broker or the store down, restarting, unreachable): a service started before its
 * broker or database waits for them, with a log line per attempt and backoff (1 s doubling to 30 s),
 * instead of exiting. Any other failure (a wrong setting, a bug) is rethrown at once.
 */
export async function untilAvailable<T>(what: string, attempt: () => Promise<T>, options: WaitOptions): Promise<T> {
  const initial = options.initialDelayMs ?? 1_000;
  const max = options.maxDelayMs ?? 30_000;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let failures = 0; ; failures++) {
    try {
      return await attempt();
    } catch (err) {
      if (!isInfrastructureError(err) || options.cancelled?.()) throw err;
      const delay = Math.min(max, initial * 2 ** failures);
      options.logger.warn(
        `waiting for ${what} (attempt ${failures + 1} failed, next in ${Math.round(delay / 100) / 10} s): ${err instanceof Error ? err.message : String(err)}`,
      );
      await sleep(delay);
    }
  }
}
