import { join } from 'node:path';
import { InProcessBus } from '@robustrl/bus';

// Loads the stub build of the addon (always built next to the real one): the agent must refuse weight
// work with the module's reason rather than fail somewhere inside a transfer. Jest gives each spec file
// its own module registry, and the facade is imported only after the variable is set, so only this file
// sees the stub.
const STUB = join(__dirname, '..', '..', '..', '..', 'native', 'ucx', 'build', 'Release', 'ucx_stub.node');

describe('weight plane without the native UCX module', () => {
  afterAll(() => {
    delete process.env.ROBUSTRL_UCX_ADDON;
  });

  it('starts without a weight server and refuses weight work with the reason', async () => {
    process.env.ROBUSTRL_UCX_ADDON = STUB;
    const { WeightPlane, WeightTransferUnavailableError } = await import('./weight-plane');
    const bus = new InProcessBus();
    const limits = { chunkBytes: 1, maxBytesPerSecond: 0, opTimeoutMs: 1, catalogWaitMs: 1 };
    const plane = new WeightPlane(
      { jobId: 'j', machineId: 'm-1', bindHost: '127.0.0.1', port: 0, advertiseHost: '127.0.0.1', shmDir: '/dev/shm', limits },
      bus,
      async () => 'x',
    );
    expect(plane.available).toBe(false);
    expect(await plane.start()).toBeNull();
    const refusal = await plane.publish({ version: 1, step: 0, shmName: 'w', bucketSizes: [1] }).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(WeightTransferUnavailableError);
    expect((refusal as Error).message).toMatch(/^weight transfer unavailable on m-1: .*stub/);
    expect(() => plane.latest()).toThrow(WeightTransferUnavailableError);
    expect(plane.status()).toMatchObject({ available: false, address: null, versions: [] });
    await plane.stop();
    await bus.close();
  });
});
