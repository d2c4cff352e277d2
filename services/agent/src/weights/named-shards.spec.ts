import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { InProcessBus, Subscription } from '@robustrl/bus';
import { createMessage, decodeMessage, Draft, RobustrlMessage, Topics, WeightTensor } from '@robustrl/contracts';
import { step } from '@robustrl/domain-kit';
import { ucxInfo } from '@robustrl/ucx';
import { eventually } from '@robustrl/testing/eventually';
import {
  createWeightRegistryDecider,
  WEIGHT_REGISTRY_INPUT_TYPES,
  WeightRegistryEvent,
  WeightRegistryInput,
  WeightRegistryState,
} from '@robustrl/weight-registry-domain';
import { AgentApiController } from '../agent-api.controller';
import { agentConfigFromEnv } from '../agent-config';
import { AgentRuntime } from '../agent-runtime';

/**
 * Named, sharded versions end to end (DESIGN "Weights are named and sharded", docs/integrators/weights.md): two
 * trainer ranks on two machines each publish their shard of a version through their agent's HTTP API,
 * the weight registry's decider (hosted on the bus here, as its service does) schedules pulls per
 * (shard, bucket), and the rollouts' agents pull over real UCX — one relaying to the other — until
 * `GET /v1/weights/latest` hands the framework both parts: what a vLLM worker extension reads.
 */
const JOB = 'job-shards';
const KiB = 1024;
const describeUcx = ucxInfo().available ? describe : describe.skip;

/** Each rank's named tensors laid into its own buckets (256-byte aligned, as robustrl/named_weights.py plans them). */
const SHARDS: Array<{ bucketSizes: number[]; tensors: WeightTensor[] }> = [
  {
    bucketSizes: [64 * KiB, 32 * KiB],
    tensors: [
      { name: 'model.embed_tokens.weight', dtype: 'bfloat16', shape: [128, 128], bucket: 0, offset: 0 },
      { name: 'model.layers.0.mlp.up_proj.weight', dtype: 'float32', shape: [64, 128], bucket: 1, offset: 0 },
    ],
  },
  {
    bucketSizes: [16 * KiB, 48 * KiB, 256],
    tensors: [
      { name: 'model.layers.0.self_attn.q_proj.weight', dtype: 'float16', shape: [64, 64], bucket: 0, offset: 0 },
      { name: 'lm_head.weight', dtype: 'bfloat16', shape: [192, 128], bucket: 1, offset: 0 },
      { name: 'model.norm.weight', dtype: 'float32', shape: [32], bucket: 2, offset: 0 },
    ],
  },
];

/** The weight registry on the bus: its decider folds membership and weight events and publishes what it decides. */
async function hostRegistry(bus: InProcessBus): Promise<Subscription> {
  const decider = createWeightRegistryDecider();
  let state: WeightRegistryState = decider.initialState();
  const inputs: ReadonlySet<string> = new Set(WEIGHT_REGISTRY_INPUT_TYPES);
  let turn = Promise.resolve();
  return bus.subscribe({
    groupId: 'weight-registry',
    topics: [Topics.membership, Topics.weights],
    fromBeginning: true,
    handler: (d) => {
      const m = d.message;
      if (m.jobId !== JOB || !inputs.has(m.type)) return Promise.resolve();
      // One decision at a time: the partitions' loops deliver concurrently.
      turn = turn.then(async () => {
        const toEvent = (o: Draft) => createMessage(o.type, o.data as never, { jobId: JOB, source: 'weight-registry', occurredAt: new Date().toISOString() });
        const stepped = step(
          decider,
          state,
          { kind: 'observe', message: m as WeightRegistryInput, now: Date.now() },
          toEvent as (o: Draft) => WeightRegistryEvent,
        );
        state = stepped.state;
        for (const e of stepped.events) await bus.publish(e as RobustrlMessage);
      });
      return turn;
    },
  });
}

describeUcx('named, sharded weights: two trainer ranks publish, rollouts end up with both parts', () => {
  const shm = mkdtempSync(join(tmpdir(), 'robustrl-shm-'));
  const dir = mkdtempSync(join(tmpdir(), 'robustrl-shards-'));
  const bus = new InProcessBus();
  const agents: Array<{ runtime: AgentRuntime; app: INestApplication; url: string }> = [];
  let registry: Subscription;
  const regions = SHARDS.map((s, i) => {
    const bytes = Buffer.alloc(s.bucketSizes.reduce((a, b) => a + b, 0));
    for (let k = 0; k < bytes.length; k++) bytes[k] = ((k + 1) * 2654435761 * (i + 5)) >>> 24;
    return bytes;
  });

  async function agent(machineId: string, role: 'trainer' | 'rollout') {
    const config = agentConfigFromEnv({
      ROBUSTRL_JOB_ID: JOB,
      ROBUSTRL_MACHINE_ID: machineId,
      ROBUSTRL_ROLE: role,
      ROBUSTRL_GPU_SOURCE: 'emulated',
      ROBUSTRL_ROLLOUT_COMMAND: 'exec sleep 120',
      ROBUSTRL_TRAINER_COMMAND: 'exec sleep 120',
      ROBUSTRL_STOP_GRACE_SECONDS: '1',
      ROBUSTRL_GPU_SAMPLE_SECONDS: '3600',
      ROBUSTRL_WEIGHTS_PORT: '0',
      ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
      ROBUSTRL_WEIGHTS_SHM_DIR: shm,
      ROBUSTRL_WEIGHTS_CHUNK_MIB: '0.03125',
      ROBUSTRL_WEIGHTS_CUDA_DEVICE: 'none',
    });
    const runtime = new AgentRuntime(bus, config);
    const moduleRef = await Test.createTestingModule({
      controllers: [AgentApiController],
      providers: [{ provide: AgentRuntime, useValue: runtime }],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    await runtime.start(url);
    agents.push({ runtime, app, url });
    return url;
  }
  const call = async (url: string, path: string, body?: unknown) => {
    const res = await fetch(
      `${url}${path}`,
      body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
    );
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const weightEvents = (type: string) =>
    bus
      .read(Topics.weights)
      .map((r) => decodeMessage(r.value))
      .flatMap((d) => (d.ok && d.message.type === type ? [d.message] : []));

  let trainers: string[] = [];
  let rollouts: string[] = [];

  beforeAll(async () => {
    registry = await hostRegistry(bus);
    trainers = [await agent('trainer-0', 'trainer'), await agent('trainer-1', 'trainer')];
    rollouts = [await agent('rollout-0', 'rollout'), await agent('rollout-1', 'rollout')];
    regions.forEach((bytes, i) => writeFileSync(join(shm, `rank${i}-v1`), bytes));
  });
  afterAll(async () => {
    for (const a of agents) {
      await a.runtime.stop();
      await a.app.close();
    }
    await registry.close();
    await bus.close();
    rmSync(shm, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a manifest it could not trust, naming each problem (400), and publishes nothing', async () => {
    const bad = await call(trainers[0], '/v1/weights/versions', {
      version: 1,
      step: 1,
      shmName: 'rank0-v1',
      bucketSizes: SHARDS[0].bucketSizes,
      tensors: [
        { ...SHARDS[0].tensors[1], offset: 1024 },
        { ...SHARDS[0].tensors[0], bucket: 5 },
      ],
      shard: { index: 2, count: 2 },
    });
    expect(bad.status).toBe(400);
    expect((bad.body.issues as Array<{ path: string }>).map((i) => i.path).sort()).toEqual(['shard.index', 'tensors.0.offset', 'tensors.1.bucket']);
    expect(weightEvents('WeightVersionPublished')).toEqual([]);
  });

  it('rank 0 publishes its shard: rollouts pull it, but no version is whole until rank 1 publishes too', async () => {
    const res = await call(trainers[0], '/v1/weights/versions', {
      version: 1,
      step: 1,
      shmName: 'rank0-v1',
      bucketSizes: SHARDS[0].bucketSizes,
      tensors: SHARDS[0].tensors,
      shard: { index: 0, count: 2 },
    });
    expect(res.status).toBe(202);
    const manifest = weightEvents('WeightVersionPublished')[0];
    expect(manifest.data).toMatchObject({ version: 1, tensors: SHARDS[0].tensors, shard: { index: 0, count: 2 }, sources: [{ instanceId: 'trainer-0' }] });
    for (const url of rollouts)
      await eventually(
        'shard 0 pulled',
        async () => {
          const w = await call(url, '/v1/weights');
          return (w.body.versions as Array<{ shard: number; complete: boolean }>).some((v) => v.shard === 0 && v.complete) ? true : undefined;
        },
        20_000,
      );
    for (const url of rollouts) expect((await call(url, '/v1/weights/latest')).status).toBe(404);
    expect(weightEvents('RelayJoined')).toEqual([]);
  });

  it('rank 1 publishes its shard: each rollout ends up with both parts in `latest`, byte-exact, with their named tensors', async () => {
    const res = await call(trainers[1], '/v1/weights/versions', {
      version: 1,
      step: 1,
      shmName: 'rank1-v1',
      bucketSizes: SHARDS[1].bucketSizes,
      tensors: SHARDS[1].tensors,
      shard: { index: 1, count: 2 },
    });
    expect(res.status).toBe(202);
    for (const url of rollouts) {
      const latest = await eventually(
        'both shards whole',
        async () => {
          const l = await call(url, '/v1/weights/latest');
          return l.status === 200 ? l.body : undefined;
        },
        20_000,
      );
      expect(latest).toMatchObject({ version: 1, step: 1, kind: 'pulled', path: null, shards: 2, totalBytes: regions[0].length + regions[1].length });
      const parts = latest.parts as Array<{
        shard: number;
        path: string;
        shmName: string;
        bucketSizes: number[];
        bucketStarts: number[];
        tensors: WeightTensor[];
      }>;
      expect(parts.map((p) => p.shard)).toEqual([0, 1]);
      parts.forEach((p, i) => {
        expect(p.bucketSizes).toEqual(SHARDS[i].bucketSizes);
        expect(p.bucketStarts).toEqual(SHARDS[i].bucketSizes.map((_, b) => SHARDS[i].bucketSizes.slice(0, b).reduce((x, y) => x + y, 0)));
        expect(p.tensors).toEqual(SHARDS[i].tensors);
        expect(p.path).toBe(join(shm, p.shmName));
        expect(readFileSync(p.path).equals(regions[i])).toBe(true);
      });
      expect(new Set(parts.map((p) => p.path)).size).toBe(2);
    }
    // The registry saw both rollouts whole; shard 1's pulls named their shard; the trainer is released.
    await eventually('both relay', () => (weightEvents('RelayJoined').length === 2 ? true : undefined), 10_000);
    const assigned = weightEvents('WeightPullAssigned').map((m) => m.data as { shard?: number; sourceId: string; pullId: string });
    expect(assigned.filter((a) => a.shard === 1).every((a) => a.pullId.startsWith('w1/s1/'))).toBe(true);
    for (const a of assigned) if (a.sourceId.startsWith('trainer')) expect(a.sourceId).toBe(`trainer-${a.shard ?? 0}`);
    // A rollout holding a bucket of shard 1 served it to the other (relays serve per (shard, bucket)).
    expect(assigned.some((a) => a.shard === 1 && a.sourceId.startsWith('rollout'))).toBe(true);
    await eventually('released', () => (weightEvents('TrainerReleased').length === 1 ? true : undefined), 10_000);
    const version = await call(rollouts[0], '/v1/weights/versions/1');
    expect(version.body).toMatchObject({ version: 1, shards: 2, complete: true, trainerReleased: true });
  });

  it('a restarted rank 1 publishing other content for its shard: rollouts drop and re-pull shard 1 only', async () => {
    const assignedBefore = weightEvents('WeightPullAssigned').length;
    const retrained = Buffer.from(regions[1]).reverse();
    writeFileSync(join(shm, 'rank1-v1'), retrained);
    const res = await call(trainers[1], '/v1/weights/versions', {
      version: 1,
      step: 1,
      shmName: 'rank1-v1',
      bucketSizes: SHARDS[1].bucketSizes,
      tensors: SHARDS[1].tensors,
      shard: { index: 1, count: 2 },
    });
    expect(res.status).toBe(202);
    for (const url of rollouts)
      await eventually(
        'shard 1 pulled again',
        async () => {
          const l = await call(url, '/v1/weights/latest');
          const parts = l.body.parts as Array<{ path: string }> | undefined;
          return l.status === 200 && readFileSync(parts![1].path).equals(retrained) ? parts : undefined;
        },
        20_000,
      );
    const again = weightEvents('WeightPullAssigned')
      .slice(assignedBefore)
      .map((m) => m.data as { shard?: number });
    expect(again.length).toBeGreaterThan(0);
    expect(again.every((a) => a.shard === 1)).toBe(true);
  });
});
