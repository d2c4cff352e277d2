import { EmulatedGpuActivitySource } from './emulated-source';

describe('EmulatedGpuActivitySource', () => {
  it('reads 0 before any push, so a trainer that never reports cannot look active', async () => {
    const source = new EmulatedGpuActivitySource();
    expect(source.kind).toBe('emulated');
    expect(source.lastPushAt).toBeNull();
    await expect(source.sample()).resolves.toEqual({ tensorActive: 0, perGpu: [] });
  });

  it('reports the latest push, with its per-GPU breakdown when given', async () => {
    let now = 1_000;
    const source = new EmulatedGpuActivitySource({ now: () => now });
    source.push(0.9, [0.8, 1]);
    now = 2_000;
    source.push(0.4);
    expect(source.lastPushAt).toBe(2_000);
    await expect(source.sample()).resolves.toEqual({ tensorActive: 0.4, perGpu: [] });
    source.push(0.5, [0.25, 0.75]);
    await expect(source.sample()).resolves.toEqual({ tensorActive: 0.5, perGpu: [0.25, 0.75] });
  });

  it('does not let a caller change a reading through the arrays it passed or got', async () => {
    const source = new EmulatedGpuActivitySource();
    const perGpu = [0.5];
    source.push(0.5, perGpu);
    perGpu[0] = 0;
    const first = await source.sample();
    first.perGpu[0] = 0;
    await expect(source.sample()).resolves.toEqual({ tensorActive: 0.5, perGpu: [0.5] });
  });

  it('falls back to 0 once the latest push is older than staleAfterMs: a hung trainer stops pushing', async () => {
    let now = 0;
    const source = new EmulatedGpuActivitySource({ staleAfterMs: 60_000, now: () => now });
    source.push(0.7);
    now = 60_000;
    await expect(source.sample()).resolves.toMatchObject({ tensorActive: 0.7 });
    now = 60_001;
    await expect(source.sample()).resolves.toEqual({ tensorActive: 0, perGpu: [] });
    source.push(0.2);
    await expect(source.sample()).resolves.toMatchObject({ tensorActive: 0.2 });
  });

  it('keeps the latest push for good with staleAfterMs: Infinity', async () => {
    let now = 0;
    const source = new EmulatedGpuActivitySource({ staleAfterMs: Number.POSITIVE_INFINITY, now: () => now });
    source.push(0.3);
    now = 10 ** 12;
    await expect(source.sample()).resolves.toMatchObject({ tensorActive: 0.3 });
  });

  it('rejects values outside 0..1 and leaves the previous push in place', async () => {
    const source = new EmulatedGpuActivitySource();
    source.push(0.6);
    expect(() => source.push(1.5)).toThrow(new RangeError('tensorActive must be a number in 0..1, got 1.5'));
    expect(() => source.push(Number.NaN)).toThrow(RangeError);
    expect(() => source.push(0.5, [0.5, -0.1])).toThrow('perGpu[1] must be a number in 0..1, got -0.1');
    await expect(source.sample()).resolves.toMatchObject({ tensorActive: 0.6 });
  });
});
