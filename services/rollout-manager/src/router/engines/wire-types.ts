/** The shapes every engine adapter and the stream splice share: the request's API, its JSON, the ids and versions an engine reports. */

export type Api = 'chat' | 'completions';
export type Json = Record<string, unknown>;

/** A span of output tokens (indexes in this request's output) sampled by one weight version. */
export interface VersionSpan {
  version: number;
  start: number;
  end: number;
}

export const isIdList = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => Number.isInteger(x) && (x as number) >= 0);
