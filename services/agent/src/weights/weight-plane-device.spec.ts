import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { InProcessBus } from '@robustrl/bus';
import { createMessage, DataOf, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { cuda, ucxInfo } from '@robustrl/ucx';
import { eventually } from '@robustrl/testing/eventually';
import { sampledChecksum, bufferReader } from './bucket-checksum';
import { IpcBucket, WeightPlane } from './weight-plane';

/**
 * The weight plane with buckets in "device memory" handed over as CUDA IPC handles — a trainer's
 * published buckets and a rollout's pull target — on a machine without a GPU: the UCX module is pointed
 * at the stand-in CUDA driver (native/ucx/test/fake-cuda: /dev/shm memory reported as host memory), and
 * framework processes export their allocations as a framework exports its tensors. It covers the agent's
 * part end to end (publish from handles with sampled checksums, serve per bucket, pull into the target,
 * relay from it, retire frees the target); gpu/check.sh runs the same on a GPU with real device memory.
 */
const JOB = 'job-device';
const KiB = 1024;
const SIZES = [256 * KiB, 64 * KiB, 1024 * KiB + 17];
const ucxDir = resolve(__dirname, '../../../../native/ucx');
const fake = spawnSync(process.execPath, [join(ucxDir, 'test/fake-cuda/fake-driver.mjs')], { encoding: 'utf8' });
// The addon reads it when it first loads the driver (on the first CUDA call, none before this spec).
if (fake.status === 0) process.env.ROBUSTRL_CUDA_DRIVER = fake.stdout;
const describeDevice = ucxInfo().available && fake.status === 0 ? describe : describe.skip;

/** A framework process holding "device" buffers (native/ucx/test/fake-cuda/exporter.cjs). */
class Framework {
  private readonly proc: ChildProcess;
  private readonly pending: Array<(v: Record<string, string | number>) => void> = [];
  constructor() {
    this.proc = spawn(process.execPath, [join(ucxDir, 'test/fake-cuda/exporter.cjs')], { stdio: ['pipe', 'pipe', 'inherit'], env: process.env });
    createInterface({ input: this.proc.stdout! }).on('line', (l) => this.pending.shift()?.(JSON.parse(l)));
  }
  call(req: object): Promise<Record<string, string | number>> {
    return new Promise((resolve) => {
      this.pending.push(resolve);
      this.proc.stdin!.write(JSON.stringify(req) + '\n');
    });
  }
  /** One allocation per bucket (the second at an offset inside a larger one, as a tensor in a storage). */
  async buckets(fills: Buffer[]): Promise<{ buckets: IpcBucket[]; addresses: string[] }> {
    const buckets: IpcBucket[] = [];
    const addresses: string[] = [];
    for (const [i, fill] of fills.entries()) {
      const at = i === 1 ? 4 * KiB : 0;
      const e = await this.call({ op: 'alloc', bytes: fill.length, fill: fill.toString('base64'), at });
      if (typeof e.error === 'string') throw new Error(e.error);
      buckets.push({ sizeBytes: fill.length, handle: String(e.handle), offset: Number(e.offset), device: 0 });
      addresses.push(String(e.address));
    }
    return { buckets, addresses };
  }
  async read(address: string, offset: number, length: number): Promise<Buffer> {
    return Buffer.from(String((await this.call({ op: 'read', address, offset, length })).bytes), 'base64');
  }
  close(): void {
    this.proc.kill();
  }
}

describeDevice('weight plane with device buckets from CUDA IPC handles (stand-in driver)', () => {
  const shm = mkdtempSync(join(tmpdir(), 'robustrl-shm-'));
  const bus = new InProcessBus();
  const seen: RobustrlMessage[] = [];
  const limits = { chunkBytes: 128 * KiB, maxBytesPerSecond: 0, opTimeoutMs: 5_000, catalogWaitMs: 3_000 };
  const emitFrom =
    (machineId: string) =>
    async <T extends 'WeightVersionPublished' | 'WeightPullCompleted' | 'WeightPullFailed'>(type: T, data: DataOf<T>) => {
      const m = createMessage(type, data, { jobId: JOB, source: `agent/${machineId}`, occurredAt: new Date().toISOString() });
      await bus.publish(m as RobustrlMessage);
      return m.eventId;
    };
  // cudaDevice 0: the planes make the (stand-in) driver's context current before their UCX workers.
  const plane = (machineId: string) =>
    new WeightPlane(
      { jobId: JOB, machineId, bindHost: '127.0.0.1', advertiseHost: '127.0.0.1', port: 0, shmDir: shm, limits, cudaDevice: 0 },
      bus,
      emitFrom(machineId),
    );
  const trainer = plane('trainer-0');
  const rollout = plane('rollout-0');
  const relayPuller = plane('rollout-1');
  const trainerFramework = new Framework();
  const rolloutFramework = new Framework();
  const weights = SIZES.map((n, b) => {
    const buf = Buffer.alloc(n);
    for (let i = 0; i < n; i++) buf[i] = ((i + 1) * 2654435761 * (b + 3)) >>> 24;
    return buf;
  });
  let pullSeq = 0;
  let rolloutAddresses: string[] = [];
  let trainerAddresses: string[] = [];

  async function assign(version: number, bucketIndex: number, pullerId: string, source: { id: string; plane: WeightPlane }) {
    const pullId = `w${version}/b${bucketIndex}/${pullerId}#${++pullSeq}`;
    await bus.publish(
      createMessage(
        'WeightPullAssigned',
        { pullId, version, bucketIndex, pullerId, sourceId: source.id, sourceAddress: source.plane.address! },
        { jobId: JOB, source: 'registry', occurredAt: new Date().toISOString() },
      ) as RobustrlMessage,
    );
    return eventually(
      `outcome of ${pullId}`,
      () =>
        seen.find((m) => (m.type === 'WeightPullCompleted' || m.type === 'WeightPullFailed') && (m.data as { pullId: string }).pullId === pullId) as
          MessageOf<'WeightPullCompleted' | 'WeightPullFailed'> | undefined,
      15_000,
    );
  }

  beforeAll(async () => {
    await bus.subscribe({ groupId: 'observer', topics: [Topics.weights], handler: async (d) => void seen.push(d.message) });
    for (const p of [trainer, rollout, relayPuller]) await p.start();
  });
  afterAll(async () => {
    for (const p of [trainer, rollout, relayPuller]) await p.stop();
    trainerFramework.close();
    rolloutFramework.close();
    await bus.close();
    rmSync(shm, { recursive: true, force: true });
  });

  it('the stand-in driver is the one in use (else this spec would prove nothing)', () => {
    expect(cuda.info()).toMatchObject({ available: true, driverPath: fake.stdout });
  });

  it('a trainer publishes a version from IPC handles: one region per bucket, sampled checksums, nothing copied to the host', async () => {
    const { buckets, addresses } = await trainerFramework.buckets(weights);
    trainerAddresses = addresses;
    const res = await trainer.publishDevice({ version: 1, step: 3, buckets });
    const manifest = await eventually('manifest', () => seen.find((m): m is MessageOf<'WeightVersionPublished'> => m.type === 'WeightVersionPublished'));
    expect(manifest.data.buckets.map((b) => b.sizeBytes)).toEqual(SIZES);
    expect(res.checksums).toEqual(weights.map((w) => sampledChecksum(bufferReader(w), w.length)));
    expect(res.checksums.every((c) => c.startsWith('sampled-sha256:4194304:4096:'))).toBe(true);
    expect(trainer.status().versions).toEqual([expect.objectContaining({ version: 1, kind: 'published', path: null, target: null, complete: true })]);
  });

  it('a rollout pulls every bucket into the device target its framework registered, byte-exact; how it travelled is reported', async () => {
    const { buckets, addresses } = await rolloutFramework.buckets(SIZES.map((n) => Buffer.alloc(n, 0xee)));
    rolloutAddresses = addresses;
    expect(rollout.registerTarget({ name: 'slot-a', buckets })).toMatchObject({ name: 'slot-a', buckets: SIZES.length });
    for (const b of SIZES.keys()) {
      const outcome = await assign(1, b, 'rollout-0', { id: 'trainer-0', plane: trainer });
      expect(outcome.type).toBe('WeightPullCompleted');
      const transfer = (outcome.data as DataOf<'WeightPullCompleted'>).transfer;
      expect(transfer).toMatchObject({ localMemory: 'host', sourceMemory: 'host', emulated: false });
    }
    expect(rollout.latest()).toMatchObject({ version: 1, kind: 'pulled', path: null, target: 'slot-a', totalBytes: weights.reduce((a, w) => a + w.length, 0) });
    for (const [b, w] of weights.entries()) {
      const offset = b === 1 ? 4 * KiB : 0;
      expect((await rolloutFramework.read(addresses[b], offset, w.length)).equals(w)).toBe(true);
    }
  });

  it('another rollout relays from that target; the trainer may reuse its buffers once published; a bucket whose bytes changed since the manifest fails its checksum', async () => {
    for (const b of SIZES.keys()) expect((await assign(1, b, 'rollout-1', { id: 'rollout-0', plane: rollout })).type).toBe('WeightPullCompleted');
    expect(relayPuller.latest()).toMatchObject({ version: 1, target: null, path: expect.stringContaining(shm) });
    // The trainer's framework reuses bucket 2's buffer once publishDevice returned: the agent serves its own copy.
    await trainerFramework.call({ op: 'write', address: trainerAddresses[2], offset: 0, bytes: Buffer.alloc(1 << 20, 0x5a).toString('base64') });
    expect((await assign(1, 2, 'rollout-1', { id: 'trainer-0', plane: trainer })).type).toBe('WeightPullCompleted');
    // The rollout's framework writes into its target while the agent still serves it: pulled from there, it no longer matches.
    await rolloutFramework.call({ op: 'write', address: rolloutAddresses[2], offset: 0, bytes: Buffer.alloc(1 << 20, 0x5a).toString('base64') });
    const outcome = await assign(1, 2, 'rollout-1', { id: 'rollout-0', plane: rollout });
    expect(outcome.type).toBe('WeightPullFailed');
    expect((outcome.data as { reason: string }).reason).toMatch(/^checksum mismatch on bucket 2: expected sampled-sha256:/);
  });

  it('retiring the version frees the target for the next one (the framework keeps its buffers)', async () => {
    await bus.publish(
      createMessage('WeightVersionRetired', { version: 1 }, { jobId: JOB, source: 'registry', occurredAt: new Date().toISOString() }) as RobustrlMessage,
    );
    await eventually('retired', () => (rollout.status().versions.length === 0 ? true : undefined));
    const { buckets } = await trainerFramework.buckets(weights.map((w) => Buffer.from(w).reverse()));
    await trainer.publishDevice({ version: 2, step: 4, buckets });
    await eventually('manifest 2', () => seen.find((m) => m.type === 'WeightVersionPublished' && (m.data as { version: number }).version === 2));
    expect((await assign(2, 0, 'rollout-0', { id: 'trainer-0', plane: trainer })).type).toBe('WeightPullCompleted');
    expect(rollout.status().versions).toEqual([expect.objectContaining({ version: 2, target: 'slot-a' })]);
    expect(rollout.removeTarget('slot-a')).toBe(true);
    expect(rollout.status().versions).toEqual([]);
  });

  it('a handle the driver refuses is a 400-class error naming the bucket, and nothing stays mapped', async () => {
    const { buckets, addresses } = await trainerFramework.buckets([Buffer.alloc(4 * KiB, 1), Buffer.alloc(4 * KiB, 2)]);
    await trainerFramework.call({ op: 'free', address: addresses[1] });
    const refused = trainer.publishDevice({ version: 9, step: 9, buckets });
    await expect(refused).rejects.toBeInstanceOf(RangeError); // the API answers a RangeError with 400
    await expect(refused).rejects.toThrow(/^bucket 1: .*cuIpcOpenMemHandle/);
    expect(trainer.status().versions.map((v) => v.version)).not.toContain(9);
  });
});
