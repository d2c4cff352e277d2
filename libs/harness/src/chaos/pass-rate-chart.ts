/**
 * The GRPO job's greedy pass rate against its step, one line per run (fault-free, faulted, …), as a
 * self-contained SVG: what docs/contributors/chaos.md links to show that faults and recoveries left the learning intact.
 * Pure: series in, markup out.
 */
export interface PassRateSeries {
  label: string;
  /** [step, pass rate 0..1], any order. */
  points: Array<[number, number]>;
}

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];
const W = 640;
const H = 360;
const M = { left: 56, right: 16, top: 36, bottom: 44 };

export function passRateSvg(title: string, series: PassRateSeries[]): string {
  const steps = series.flatMap((s) => s.points.map(([step]) => step));
  const maxStep = Math.max(1, ...steps);
  const x = (step: number) => M.left + (step / maxStep) * (W - M.left - M.right);
  const y = (rate: number) => H - M.bottom - rate * (H - M.top - M.bottom);
  const grid = [0, 0.25, 0.5, 0.75, 1]
    .map(
      (r) =>
        `<line x1="${M.left}" x2="${W - M.right}" y1="${y(r)}" y2="${y(r)}" stroke="#ddd"/>` +
        `<text x="${M.left - 8}" y="${y(r) + 4}" text-anchor="end">${r.toFixed(2)}</text>`,
    )
    .join('');
  const ticks = stepTicks(maxStep)
    .map((s) => `<text x="${x(s)}" y="${H - M.bottom + 18}" text-anchor="middle">${s}</text>`)
    .join('');
  const lines = series
    .map((s, i) => {
      const colour = COLOURS[i % COLOURS.length];
      const pts = [...s.points].sort((a, b) => a[0] - b[0]);
      const path = pts.map(([step, rate]) => `${x(step).toFixed(1)},${y(rate).toFixed(1)}`).join(' ');
      const dots = pts.map(([step, rate]) => `<circle cx="${x(step).toFixed(1)}" cy="${y(rate).toFixed(1)}" r="3" fill="${colour}"/>`).join('');
      const legend = `<rect x="${M.left + 12}" y="${M.top + 8 + i * 18}" width="12" height="3" fill="${colour}"/><text x="${M.left + 30}" y="${M.top + 13 + i * 18}">${escape(s.label)}</text>`;
      return `<polyline fill="none" stroke="${colour}" stroke-width="2" points="${path}"/>${dots}${legend}`;
    })
    .join('');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${escape(title)}</text>`,
    grid,
    ticks,
    `<text x="${(M.left + W - M.right) / 2}" y="${H - 8}" text-anchor="middle">training step</text>`,
    `<text transform="translate(14 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">greedy pass rate</text>`,
    lines,
    '</svg>',
    '',
  ].join('\n');
}

function stepTicks(maxStep: number): number[] {
  const every = maxStep <= 10 ? 1 : maxStep <= 50 ? 5 : 10;
  const out: number[] = [];
  for (let s = 0; s <= maxStep; s += every) out.push(s);
  return out;
}

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
