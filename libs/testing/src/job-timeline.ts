import { createMessage, DataOf, Draft, MessageOf, MessageType } from '@robustrl/contracts';

/** Epoch of every hand-written timeline: times in specs read as seconds since job start. */
export const T0 = Date.parse('2026-11-21T08:00:00.000Z');
export const at = (seconds: number) => T0 + seconds * 1000;
export const iso = (seconds: number) => new Date(at(seconds)).toISOString();

/** A message of `jobId` that happened `seconds` after T0, with deterministic ids for readable failures. */
export function timeline(jobId = 'job-1') {
  let n = 0;
  return function msg<T extends MessageType>(seconds: number, type: T, data: DataOf<T>): MessageOf<T> {
    n += 1;
    const eventId = `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
    return createMessage(type, data, { jobId, source: 'spec', occurredAt: iso(seconds), eventId });
  };
}

/**
 * The host's envelope in a spec: a decider's output as the message the service would publish at `now`
 * (what `DeciderRun.for(decider, published())` folds back into the decider).
 */
export function published(jobId = 'job-1') {
  let n = 0;
  return function envelope<D extends Draft>(output: D, now: number): MessageOf<D['type']> {
    n += 1;
    const eventId = `00000000-0000-4000-9000-${n.toString(16).padStart(12, '0')}`;
    return createMessage<D['type']>(output.type, output.data as DataOf<D['type']>, { jobId, source: 'spec', occurredAt: new Date(now).toISOString(), eventId });
  };
}
