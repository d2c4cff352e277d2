import { custom, Env } from '@robustrl/config';
import { DEFAULT_ETTR_SETTINGS, EttrSettings } from '@robustrl/ettr';

const wholeSeconds = (name: string, meaning: string, fallback: number) =>
  custom(name, {
    owner: 'controller',
    meaning,
    default: fallback,
    accepted: 'a whole number of seconds greater than 0',
    parse: (raw) => (/^\d+$/.test(raw) && Number.isSafeInteger(Number(raw)) && Number(raw) > 0 ? Number(raw) : undefined),
  });

export const ETTR_SAMPLE = wholeSeconds('ROBUSTRL_ETTR_SAMPLE_SECONDS', 'the resolution of the sliding ETTR series', DEFAULT_ETTR_SETTINGS.sampleMs / 1000);
export const ETTR_WINDOW = wholeSeconds(
  'ROBUSTRL_ETTR_WINDOW_SECONDS',
  "the sliding ETTR window (the paper's Fig. 12 uses 5 minutes), a whole multiple of the sample period",
  DEFAULT_ETTR_SETTINGS.windowMs / 1000,
);

/**
 * The ETTR read model's settings from the environment:
 *  - ROBUSTRL_ETTR_WINDOW_SECONDS (default 300): the sliding ETTR window (the paper's Fig. 12 uses 5 minutes);
 *  - ROBUSTRL_ETTR_SAMPLE_SECONDS (default 60): the resolution of the sliding series.
 *
 * Both are whole seconds: event times are milliseconds, and a sub-second sample period buys nothing
 * for a metric about outages that last minutes while making "a whole number of periods" a float test.
 * A bad value stops the controller at start-up with the variable named, rather than serving a
 * series that silently means something else.
 */
export function ettrSettingsFromEnv(env: Env): EttrSettings {
  const sampleSeconds = ETTR_SAMPLE.read(env);
  const windowSeconds = ETTR_WINDOW.read(env);
  if (windowSeconds % sampleSeconds !== 0) {
    throw new Error(
      `ROBUSTRL_ETTR_WINDOW_SECONDS (${windowSeconds}) must be a whole multiple of ROBUSTRL_ETTR_SAMPLE_SECONDS (${sampleSeconds}): the sliding ETTR sums whole sample periods`,
    );
  }
  const { maxBuckets } = DEFAULT_ETTR_SETTINGS;
  // The projection keeps only maxBuckets sample periods (that is what bounds its memory): a longer window never fills.
  if (windowSeconds / sampleSeconds > maxBuckets) {
    throw new Error(
      `ROBUSTRL_ETTR_WINDOW_SECONDS (${windowSeconds}) spans more than the ${maxBuckets} sample periods of ROBUSTRL_ETTR_SAMPLE_SECONDS (${sampleSeconds}) that are kept per job`,
    );
  }
  return { windowMs: windowSeconds * 1000, sampleMs: sampleSeconds * 1000, maxBuckets };
}

/**
 * `?windowSeconds=N` of the HTTP API: the reason it is unusable, or the window in milliseconds.
 * Same rules as the environment (whole periods, within the kept series), answered as a 400 instead.
 */
export function parseWindowSeconds(raw: unknown, settings: EttrSettings): { windowMs: number } | { error: string } {
  if (raw === undefined) return { windowMs: settings.windowMs };
  if (typeof raw !== 'string') return { error: 'windowSeconds must be given once, as a whole number of seconds' };
  const sampleSeconds = settings.sampleMs / 1000;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value <= 0)
    return { error: `windowSeconds must be a whole number of seconds greater than 0, got '${raw}'` };
  if (value % sampleSeconds !== 0)
    return { error: `windowSeconds (${value}) must be a multiple of the sample period of ${sampleSeconds} s (ROBUSTRL_ETTR_SAMPLE_SECONDS)` };
  const keptSeconds = settings.maxBuckets * sampleSeconds;
  if (value > keptSeconds) return { error: `windowSeconds (${value}) exceeds the ${keptSeconds} s of sliding series kept per job` };
  return { windowMs: value * 1000 };
}
