import { TurnKind } from '../events/trajectories';
import { MAX_ID_LENGTH, MAX_STORED_INT, SpanContext } from './trajectory-api';

/**
 * The trajectory store's input contract (trajectory-api.ts) checked without zod, for the router's path,
 * which checks every turn it records: zod walked each token id and log-prob of a turn's spans, about 5 %
 * of the router's CPU a recorded request (docs/benchmarks.md "The router on every request").
 *
 * Each predicate is true only for a value its schema accepts: false means "ask the schema", which says
 * what is wrong, never "invalid". Its spec holds it to that on generated values, valid and broken.
 */
export function isStorableTurn(value: unknown): boolean {
  if (!isRecord(value)) return false;
  const t = value;
  return (
    isId(t.trajectoryId) &&
    isId(t.turnId) &&
    isCount(t.turnIndex) &&
    TURN_KINDS.has(t.kind as string) &&
    t.content !== undefined &&
    (t.rolloutId === null || isId(t.rolloutId)) &&
    isCount(t.weightVersion) &&
    isCount(t.tokens) &&
    (t.attempt === undefined || isCount(t.attempt)) &&
    (t.spans === undefined || (Array.isArray(t.spans) && t.spans.length <= 1_000 && t.spans.every(isStorableSpan)))
  );
}

/** A trajectory's start as NewTrajectory accepts it (see isStorableTurn). */
export function isStorableStart(value: unknown): boolean {
  if (!isRecord(value)) return false;
  const t = value;
  return (
    isId(t.trajectoryId) &&
    isId(t.jobId) &&
    isId(t.batchId) &&
    isCount(t.step) &&
    isId(t.promptId) &&
    isCount(t.sampleIndex) &&
    t.prompt !== undefined &&
    (t.ownerRolloutId === undefined || t.ownerRolloutId === null || isId(t.ownerRolloutId))
  );
}

const TURN_KINDS: ReadonlySet<string> = new Set(TurnKind.options);
const SPAN_CONTEXTS: ReadonlySet<string> = new Set(SpanContext.options);
const MAX_IDS = 1_000_000;

function isStorableSpan(value: unknown): boolean {
  if (!isRecord(value)) return false;
  const s = value;
  return (
    isId(s.rolloutId) &&
    isCount(s.weightVersion) &&
    isCountList(s.tokenIds) &&
    Array.isArray(s.logprobs) &&
    s.logprobs.length === s.tokenIds.length &&
    s.logprobs.every((p) => p === null || (typeof p === 'number' && Number.isFinite(p))) &&
    (s.sampled === null || isCount(s.sampled)) &&
    SPAN_CONTEXTS.has(s.context as string) &&
    (s.prefillTokens === undefined || isCount(s.prefillTokens)) &&
    (s.promptTokenIds === undefined || isCountList(s.promptTokenIds))
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isId(value: unknown): boolean {
  return typeof value === 'string' && value.length >= 1 && value.length <= MAX_ID_LENGTH && !value.includes('\u0000');
}

function isCount(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_STORED_INT;
}

function isCountList(value: unknown): value is number[] {
  if (!Array.isArray(value) || value.length > MAX_IDS) return false;
  for (const n of value) if (!isCount(n)) return false;
  return true;
}
