/**
 * An interval in which the detector could not see its input (broker down, its consumer stopped or
 * behind, its own restart). Nothing the machines did in it is known, so it is not silence: windows
 * treat it as if it had not happened (paused, not reset — a machine 50 s silent before the gap is
 * 50 s silent after it).
 */
export interface BlindInterval {
  from: number;
  to: number;
}

/**
 * Where a time anchor (e.g. "silent since") moves once a blind interval is discounted: an anchor before
 * the gap moves forward by its length, one inside it moves to its end. Monotonic, so order between
 * anchors is kept, and elapsed time measured from the result excludes the gap.
 */
export function discountBlindInterval(anchor: number, blind: BlindInterval): number {
  if (anchor < blind.from) return anchor + (blind.to - blind.from);
  return Math.max(anchor, blind.to);
}
