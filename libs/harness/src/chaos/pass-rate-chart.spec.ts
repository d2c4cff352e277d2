import { passRateSvg } from './pass-rate-chart';

describe('the pass-rate chart', () => {
  it('draws one line with a point per evaluation per run, and a legend naming each', () => {
    const svg = passRateSvg('GRPO <seed 1>', [
      {
        label: 'fault-free',
        points: [
          [0, 0.6],
          [5, 0.7],
          [10, 0.8],
        ],
      },
      {
        label: 'role-based & 15 faults',
        points: [
          [10, 0.78],
          [0, 0.6],
        ],
      },
    ]);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.match(/<polyline /g)).toHaveLength(2);
    expect(svg.match(/<circle /g)).toHaveLength(5);
    expect(svg).toContain('GRPO &lt;seed 1&gt;');
    expect(svg).toContain('role-based &amp; 15 faults');
  });
});
