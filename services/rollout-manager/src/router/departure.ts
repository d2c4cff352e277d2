/**
 * When the router lets go of the engines of a machine that announced its departure (a notice's verdict,
 * `evidence.departsAt`; docs/planned-failures.md): a margin before the machine goes, so that the
 * requests still on its engines then are continued elsewhere while the engines still answer. The margin
 * is a fifth of the time left, at least 2 s and at most 20 s: more than the agent keeps for itself (it
 * stops its role a tenth of the grace, at most 10 s, before the deadline: termination-notice.ts).
 * Pure; at or before `now` means at once (a notice too short to drain on).
 */
export function departureLeaveAt(departsAtMs: number, now: number): number {
  const left = departsAtMs - now;
  const margin = Math.min(DEPARTURE_MARGIN.maxMs, Math.max(DEPARTURE_MARGIN.minMs, left * DEPARTURE_MARGIN.share));
  return departsAtMs - margin;
}

export const DEPARTURE_MARGIN = { share: 0.2, minMs: 2_000, maxMs: 20_000 } as const;
