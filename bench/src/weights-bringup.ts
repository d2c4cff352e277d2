import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { MessageBus } from '@robustrl/bus';
import { createMessage, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { LocalProcessSupervisor, MachineSpec } from '@robustrl/orchestrator';
import { MESSAGE_BUS, runService } from '@robustrl/service-kit';
import { createScratchDatabase } from '@robustrl/store';
import { WeightRegistryModule } from '@robustrl/weight-registry';

const AGENT_MAIN = resolve(__dirname, '..', '..', 'services', 'agent', 'dist', 'main.js');
const MiB = 1 << 20;

export interface BringUpOptions {
  brokers: string[];
  databaseUrl: string;
  rolloutCounts: number[];
  buckets: number;
  bucketMiB: number;
  /** Per-link rate every pull is paced to (one host has no NIC to saturate); 0: unpaced loopback. */
  linkMiBPerSecond: number;
  progress: (line: string) => void;
}

export interface BringUpResult {
  rollouts: number;
  mode: 'relays' | 'trainer-only';
  /** From the manifest's publication to the last rollout holding the version whole (its RelayJoined). */
  seconds: number;
  pullsFromTrainer: number;
  pullsFromRollouts: number;
}

/**
 * Time to bring N rollout agents to a new version (paper §5.2.1, Figure 18): one trainer agent and N rollout
 * agents as separate processes over the real broker, the weight registry in this process, real UCX
 * transfers (tcp) — with relays, and with the baseline where every rollout pulls every bucket from the
 * trainer (ROBUSTRL_WEIGHT_RELAYS=off). Both obey the registry's rule that a source serves one bucket to
 * one puller at a time.
 */
export async function measureBringUp(opts: BringUpOptions): Promise<BringUpResult[]> {
  const results: BringUpResult[] = [];
  for (const n of opts.rolloutCounts) {
    for (const mode of ['trainer-only', 'relays'] as const) {
      results.push(await bringUpOnce(n, mode, opts));
      const r = results.at(-1)!;
      opts.progress(`N=${n} ${mode}: ${r.seconds.toFixed(2)} s (${r.pullsFromTrainer} pulls from the trainer, ${r.pullsFromRollouts} from rollouts)`);
    }
  }
  return results;
}

async function bringUpOnce(n: number, mode: BringUpResult['mode'], opts: BringUpOptions): Promise<BringUpResult> {
  const jobId = `bench-w-${randomBytes(3).toString('hex')}`;
  const topicPrefix = `bench-w-${randomBytes(4).toString('hex')}.`;
  const shmName = `bench-${jobId}-trainer-v1`;
  const output: string[] = [];
  // A database per run: the registry's checkpoints and inbox are keyed by consumer name, not topic prefix.
  const database = await createScratchDatabase(opts.databaseUrl, 'robustrl_bench_weights');
  const supervisor = new LocalProcessSupervisor({
    stopGraceMs: 2_000,
    output: (machineId, line) => output.push(`[${machineId}] ${line}`),
    launch: (m) => ({
      command: process.execPath,
      args: [AGENT_MAIN],
      env: {
        KAFKA_BROKERS: opts.brokers.join(','),
        ROBUSTRL_TOPIC_PREFIX: topicPrefix,
        DATABASE_URL: database.url,
        ROBUSTRL_JOB_ID: m.jobId,
        ROBUSTRL_MACHINE_ID: m.machineId,
        ROBUSTRL_ROLE: m.role,
        ROBUSTRL_GPUS: '1',
        ROBUSTRL_AGENT_PORT: '0',
        ROBUSTRL_GPU_SOURCE: 'emulated',
        ROBUSTRL_GPU_SAMPLE_SECONDS: '30',
        ROBUSTRL_WEIGHTS_PORT: '0',
        ROBUSTRL_WEIGHTS_CHUNK_MIB: String(Math.min(opts.bucketMiB, 4)),
        ROBUSTRL_WEIGHTS_MAX_MIB_PER_SECOND: String(opts.linkMiBPerSecond),
      },
    }),
  });
  process.env.ROBUSTRL_WEIGHT_RELAYS = mode === 'relays' ? 'on' : 'off';
  const service = await runService(
    {
      serviceName: 'bench-weights',
      bus: { adapter: 'kafka', brokers: opts.brokers, clientId: 'bench-weights', topicPrefix },
      store: { kind: 'postgres', url: database.url },
      httpPort: 0,
    },
    [WeightRegistryModule],
    { logLevels: ['error'] },
  );
  const seen: RobustrlMessage[] = [];
  const bus = service.app.get<MessageBus>(MESSAGE_BUS);
  const observer = await bus.subscribe({
    groupId: 'bench-observer',
    topics: [Topics.membership, Topics.weights],
    handler: async (d) => void seen.push(d.message),
  });
  const of = <T extends RobustrlMessage['type']>(type: T) => seen.filter((m): m is MessageOf<T> => m.jobId === jobId && m.type === type);
  const until = async (what: string, done: () => boolean, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (Date.now() > deadline) {
        const events = seen.filter((m) => m.jobId === jobId).map((m) => `${m.occurredAt} ${m.type} ${JSON.stringify(m.data).slice(0, 200)}`);
        throw new Error(`timed out waiting for ${what}; last agent output:\n${output.slice(-30).join('\n')}\nevents:\n${events.slice(-40).join('\n')}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  try {
    await bus.publish(
      createMessage(
        'JobStarted',
        { mode: 'sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: n },
        { jobId, source: 'bench', occurredAt: new Date().toISOString() },
      ),
    );
    const machines: MachineSpec[] = [
      { machineId: 'trainer-0', role: 'trainer', zone: 'z', hardwareClass: 'bench' },
      ...Array.from({ length: n }, (_, i): MachineSpec => ({ machineId: `rollout-${i}`, role: 'rollout', zone: 'z', hardwareClass: 'bench' })),
    ];
    opts.progress(`N=${n} ${mode}: starting ${n + 1} agents`);
    await supervisor.launchJob(jobId, machines);
    await until(`${n + 1} agents registered`, () => of('MachineRegistered').length >= n + 1, 120_000);
    const trainer = of('MachineRegistered').find((m) => m.data.machineId === 'trainer-0')!.data.agentAddress;

    opts.progress(`N=${n} ${mode}: agents registered, publishing version 1`);
    const bucketBytes = opts.bucketMiB * MiB;
    writeFileSync(join('/dev/shm', shmName), randomBytes(opts.buckets * bucketBytes));
    const res = await fetch(`${trainer}/v1/weights/versions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ version: 1, step: 0, shmName, bucketSizes: Array(opts.buckets).fill(bucketBytes) }),
    });
    if (res.status !== 202) throw new Error(`publish failed: ${res.status} ${await res.text()}`);
    await until(
      `${n} rollouts holding version 1`,
      () => new Set(of('RelayJoined').map((m) => m.data.instanceId)).size >= n,
      Number(process.env.BENCH_WAIT_MS ?? 300_000),
    );
    const published = Date.parse(of('WeightVersionPublished')[0].occurredAt);
    const last = Math.max(...of('RelayJoined').map((m) => Date.parse(m.occurredAt)));
    const completed = of('WeightPullCompleted');
    if (of('WeightPullFailed').length)
      throw new Error(
        `pulls failed: ${of('WeightPullFailed')
          .map((m) => m.data.reason)
          .join('; ')}`,
      );
    return {
      rollouts: n,
      mode,
      seconds: (last - published) / 1000,
      pullsFromTrainer: completed.filter((m) => m.data.sourceId === 'trainer-0').length,
      pullsFromRollouts: completed.filter((m) => m.data.sourceId !== 'trainer-0').length,
    };
  } finally {
    await observer.close();
    await supervisor.close();
    await service.stop();
    await database.drop();
    rmSync(join('/dev/shm', shmName), { force: true });
    delete process.env.ROBUSTRL_WEIGHT_RELAYS;
  }
}

export function formatBringUp(results: BringUpResult[], opts: Pick<BringUpOptions, 'buckets' | 'bucketMiB' | 'linkMiBPerSecond'>): string {
  const lines = [
    `time to bring N rollouts to a new version of ${opts.buckets} × ${opts.bucketMiB} MiB (links paced to ${opts.linkMiBPerSecond || 'unpaced'} MiB/s):`,
    '    N   trainer-only   relays   relays/trainer-only   pulls served by rollouts (relays)',
  ];
  for (const n of [...new Set(results.map((r) => r.rollouts))]) {
    const base = results.find((r) => r.rollouts === n && r.mode === 'trainer-only')!;
    const relay = results.find((r) => r.rollouts === n && r.mode === 'relays')!;
    lines.push(
      `  ${String(n).padStart(3)}   ${base.seconds.toFixed(2).padStart(10)} s ${relay.seconds.toFixed(2).padStart(7)} s   ${(relay.seconds / base.seconds).toFixed(2).padStart(19)}   ${relay.pullsFromRollouts} of ${relay.pullsFromRollouts + relay.pullsFromTrainer}`,
    );
  }
  return lines.join('\n');
}
