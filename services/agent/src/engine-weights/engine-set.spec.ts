import { FakeVllm } from '@robustrl/testing/fake-vllm-routes';
import { EngineSet, machinePhase, managedVllmEngines } from './engine-set';
import { EngineWeightSync, HeldVersion } from './engine-weight-sync';
import { VllmEngineClient } from './vllm-engine-client';

const held = (v: number): HeldVersion => ({ version: v, parts: [{ path: `/dev/shm/v${v}`, target: null, bucketStarts: [0], tensors: [{ name: 'w' }] }] });

describe("machinePhase: one machine's phase from its engines'", () => {
  it.each([
    [[], null],
    [[{ phase: 'idle', version: 3 }], { phase: 'idle', version: 3 }],
    // One engine loading holds the machine's rollouts up: the machine is in its weight update.
    [
      [
        { phase: 'rollout', version: 3 },
        { phase: 'weight-update', version: 4 },
      ],
      { phase: 'weight-update', version: 3 },
    ],
    [
      [
        { phase: 'idle', version: 4 },
        { phase: 'rollout', version: 4 },
      ],
      { phase: 'rollout', version: 4 },
    ],
    [
      [
        { phase: 'idle', version: 4 },
        { phase: 'idle', version: 2 },
      ],
      { phase: 'idle', version: 2 },
    ],
  ] as const)('%j → %j', (phases, expected) => {
    expect(machinePhase(phases)).toEqual(expected);
  });
});

describe('EngineSet: every engine of a machine on the version its agent holds', () => {
  let engines: FakeVllm[];
  let version: HeldVersion | null;
  let phases: string[];
  let stalls: string[];
  let syncs: EngineWeightSync[];
  let set: EngineSet | undefined;

  beforeEach(async () => {
    engines = [new FakeVllm(), new FakeVllm()];
    await Promise.all(engines.map((e) => e.start()));
    version = null;
    phases = [];
    stalls = [];
    syncs = [];
  });
  /** The set over both engines, each look a tick of the test's (a long interval), loads given `deadlineMs`. */
  const build = (deadlineMs: number) => {
    set = new EngineSet(
      engines.map((e, i) => ({ engineId: `m/e${i}`, url: e.url })),
      (e, phase, onStalled) => {
        const sync = new EngineWeightSync(new VllmEngineClient(e.url), () => version, e.engineId, 60_000, phase, undefined, { deadlineMs, onStalled });
        syncs.push(sync);
        return sync;
      },
      (phase, v) => phases.push(`${phase}@${v}`),
      (detail) => stalls.push(detail),
    );
  };
  afterEach(async () => {
    set?.stop();
    await Promise.all(engines.map((e) => e.stop()));
  });

  it('loads the one held copy into each engine, and reports the machine as serving only the version all of them serve', async () => {
    build(30_000);
    version = held(2);
    await syncs[0].tick();
    expect(engines[0].version).toBe('2');
    expect(engines[1].version).toBe('default');
    expect(engines[0].bodies[0]).toMatchObject({ method: 'robustrl_load_weights', kwargs: { version: 2, parts: [{ path: '/dev/shm/v2' }] } });
    await syncs[1].tick();
    expect(engines[1].version).toBe('2');
    expect(engines[1].bodies[0]).toMatchObject({ kwargs: { version: 2, parts: [{ path: '/dev/shm/v2' }] } });
    expect(set!.loads().map((l) => [l.engineId, l.loaded?.version])).toEqual([
      ['m/e0', 2],
      ['m/e1', 2],
    ]);
    // Engine 0 stamped and loaded while engine 1 had not answered yet; then engine 1 stamped (the machine
    // then serves no more than v0 for sure), loading (the machine in its weight update) and loaded.
    expect(phases).toEqual(['rollout@0', 'weight-update@2', 'rollout@2', 'rollout@0', 'weight-update@2', 'rollout@2']);
  });

  it('reports a wedged load with the id of the engine it stalled in', async () => {
    build(1_000);
    await syncs[0].tick();
    await syncs[1].tick();
    engines[1].hangLoads = true;
    version = held(3);
    await syncs[0].tick();
    await syncs[1].tick();
    expect(engines[0].version).toBe('3');
    expect(stalls).toEqual([expect.stringMatching(/^engine m\/e1: the engine did not finish loading version 3 within 1 s/)]);
  });
});

describe('managedVllmEngines', () => {
  it('needs at least one engine, naming both settings', () => {
    expect(() =>
      managedVllmEngines(
        { engines: [], engineLoadDeadlineMs: 1000 },
        () => null,
        () => undefined,
        () => undefined,
      ),
    ).toThrow(/ROBUSTRL_ENGINE_WEIGHTS=vllm needs ROBUSTRL_INFERENCE_URL or ROBUSTRL_ENGINES/);
  });
});
