import { runExampleCommand } from './campaign-command';

/**
 * The verl example as a user runs it (examples/verl/README.md): `node bench/dist/examples/verl-example.js`,
 * a child process that must exit 0 by itself. verl's own checkpoint-engine registry makes robustrl's
 * backend for two actor ranks and a rollout, each with a real agent; every version walks from the actors'
 * per-tensor generators to the rollout's receive_weights over UCX (the weight registry scheduling the
 * pulls), bit for bit, and the rollout's agent loads it into a real vLLM engine, which then answers as
 * transformers does on the actor's weights.
 */
jest.setTimeout(600_000);

describe('examples/verl: one command moves versions through verl’s checkpoint engine and robustrl’s agents into vLLM', () => {
  it('exits 0 after two versions were received bit for bit and served by the engine', async () => {
    const output = await runExampleCommand('verl-example.js', ['--versions', '2'], 580_000);
    const lines = [...output.matchAll(/^\[example\] [\d.]+ s {2}(\{"version".*\})$/gm)].map((m) => JSON.parse(m[1]!) as Record<string, unknown>);
    expect(lines.map((l) => [l.version, l.receivedBitForBit, l.engineAnswersAsTransformers])).toEqual([
      [1, true, true],
      [2, true, true],
    ]);
    expect(lines.every((l) => Number(l.tensors) > 10)).toBe(true);
    expect(output).toMatch(/every version moved through verl’s checkpoint engine and served by the engine/);
  });
});
