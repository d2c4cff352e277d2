/**
 * Device-to-device weight pulls through the agent, checked and measured — the agent-level part of
 * native/ucx/gpu/check.sh, which runs it on a GPU machine:
 *
 *   node bench/dist/gpu-pull.js [--exporter torch|node] [--buckets 8] [--bucket-mib 256] [--rounds 3] [--perftest-memory cuda]
 *
 * Two agents, each its own process running the agent's real weight plane (a trainer and a rollout,
 * connected by this process, which forwards their weights messages and plays the weight registry),
 * and two framework processes holding the device buffers: with `--exporter torch` (the default)
 * PyTorch tensors exported by clients/python/robustrl_weights.py (native/ucx/gpu/torch_exporter.py);
 * with `--exporter node`, buffers allocated through the CUDA driver (native/ucx/test/fake-cuda/
 * exporter.cjs; with ROBUSTRL_CUDA_DRIVER pointing at the stand-in driver this runs on any machine).
 *
 * The trainer publishes a version of `--buckets` buckets from CUDA IPC handles; the rollout registers
 * device buffers as its pull target; each round the registry assigns every bucket to the rollout. Two
 * rates: moving a bucket (the agent's GETs of it, as WeightPullCompleted reports them: `getMicros`),
 * and the round's (first assignment → last WeightPullCompleted: verification, events and this
 * process's forwarding of them included). Round 1's buffers are then compared
 * byte for byte (sha256 of each bucket on both sides). Baselines in the same run: `ucx_perftest -t
 * ucp_get -m cuda` of one bucket (two processes, UCX_CUDA_IPC_ENABLE_GET_ZCOPY=on) and a plain device
 * copy of one bucket (torch copy_, or cuMemcpyDtoD with the node exporter). Prints one line per result
 * (`RESULT <name> PASS|FAIL|SKIP <detail>`), the ratios, and exits 1 if any result failed.
 */
import { ChildProcess, fork, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { InProcessBus } from '@robustrl/bus';
import { createMessage, DataOf, MessageOf, RobustrlMessage } from '@robustrl/contracts';
import { IpcBucket, WeightPlane } from '@robustrl/agent';

const MiB = 1 << 20;
// The checkout (the bundle check.sh runs lives elsewhere: it passes ROBUSTRL_REPO).
const repo = process.env.ROBUSTRL_REPO ?? resolve(__dirname, '..', '..');
const JOB = 'gpu-pull';

// ── an agent (child process) ─────────────────────────────────────────────────────────────────────
type ToAgent = { kind: 'bus'; message: RobustrlMessage } | { kind: 'call'; id: number; method: string; args: unknown[] };
type FromAgent = { kind: 'bus'; message: RobustrlMessage } | { kind: 'result'; id: number; value?: unknown; error?: string };

async function runAgent(machineId: string): Promise<void> {
  const bus = new InProcessBus();
  const shm = mkdtempSync(join(tmpdir(), `robustrl-gpu-pull-${machineId}-`));
  const send = (m: FromAgent) => process.send!(m);
  const plane = new WeightPlane(
    {
      jobId: JOB,
      machineId,
      bindHost: '127.0.0.1',
      advertiseHost: '127.0.0.1',
      port: 0,
      shmDir: shm,
      limits: {
        chunkBytes: Number(process.env.GPU_PULL_CHUNK_MIB ?? 16) * MiB,
        getsInFlight: Number(process.env.GPU_PULL_GETS_IN_FLIGHT ?? 16),
        maxBytesPerSecond: 0,
        opTimeoutMs: 30_000,
        catalogWaitMs: 10_000,
      },
      cudaDevice: Number(process.env.GPU_PULL_DEVICE ?? 0),
    },
    bus,
    async (type, data) => {
      const m = createMessage(type, data, { jobId: JOB, source: `agent/${machineId}`, occurredAt: new Date().toISOString() }) as RobustrlMessage;
      await bus.publish(m);
      send({ kind: 'bus', message: m });
      return m.eventId;
    },
  );
  process.on('message', (m: ToAgent) => {
    if (m.kind === 'bus') void bus.publish(m.message);
    else
      void (async () => {
        try {
          const target = plane as unknown as Record<string, (...a: unknown[]) => unknown>;
          send({ kind: 'result', id: m.id, value: await target[m.method](...m.args) });
        } catch (err) {
          send({ kind: 'result', id: m.id, error: err instanceof Error ? err.message : String(err) });
        }
      })();
  });
  const address = await plane.start();
  send({ kind: 'result', id: 0, value: address });
  process.on('disconnect', () => void plane.stop().finally(() => (rmSync(shm, { recursive: true, force: true }), process.exit(0))));
}

class AgentProcess {
  private readonly proc: ChildProcess;
  private seq = 0;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  constructor(
    readonly machineId: string,
    onBus: (m: RobustrlMessage, from: AgentProcess) => void,
  ) {
    this.proc = fork(__filename, ['--agent', machineId], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.proc.on('message', (m: FromAgent) => {
      if (m.kind === 'bus') return onBus(m.message, this);
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.error !== undefined) w?.reject(new Error(m.error));
      else w?.resolve(m.value);
    });
    this.proc.on('exit', (code, signal) => {
      for (const w of this.waiting.values()) w.reject(new Error(`agent ${machineId} exited (${code ?? signal})`));
      this.waiting.clear();
    });
  }
  started(): Promise<string> {
    return new Promise((resolve, reject) => this.waiting.set(0, { resolve: (v) => resolve(String(v)), reject }));
  }
  call<T>(method: string, ...args: unknown[]): Promise<T> {
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: (v) => resolve(v as T), reject });
      this.proc.send({ kind: 'call', id, method, args } satisfies ToAgent);
    });
  }
  deliver(message: RobustrlMessage): void {
    if (this.proc.connected) this.proc.send({ kind: 'bus', message } satisfies ToAgent);
  }
  stop(): void {
    if (this.proc.connected) this.proc.disconnect();
  }
}

// ── a framework process holding device buffers ───────────────────────────────────────────────────
type Answer = Record<string, unknown> & { error?: string };
class Framework {
  private readonly proc: ChildProcess;
  private readonly pending: Array<(a: Answer) => void> = [];
  constructor(kind: 'torch' | 'node') {
    this.proc =
      kind === 'torch'
        ? spawn(process.env.PYTHON ?? 'python3', [join(repo, 'native/ucx/gpu/torch_exporter.py')], { stdio: ['pipe', 'pipe', 'inherit'] })
        : spawn(process.execPath, [join(repo, 'native/ucx/test/fake-cuda/exporter.cjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
    createInterface({ input: this.proc.stdout! }).on('line', (l) => this.pending.shift()?.(JSON.parse(l) as Answer));
    this.proc.on('exit', (code) => {
      for (const p of this.pending.splice(0)) p({ error: `framework process exited (${code})` });
    });
  }
  async call(req: Record<string, unknown>): Promise<Answer> {
    const a = await new Promise<Answer>((resolve) => {
      this.pending.push(resolve);
      this.proc.stdin!.write(JSON.stringify(req) + '\n');
    });
    if (a.error) throw new Error(`${String(req.op)}: ${a.error}`);
    return a;
  }
  async buckets(count: number, bytes: number, seed: number): Promise<{ buckets: IpcBucket[]; addresses: string[] }> {
    const buckets: IpcBucket[] = [];
    const addresses: string[] = [];
    for (let i = 0; i < count; i++) {
      const e = await this.call({ op: 'alloc', bytes, seed: seed + i, at: i % 2 === 1 ? 4096 : 0 });
      buckets.push({ sizeBytes: bytes, handle: String(e.handle), offset: Number(e.offset), device: Number(e.device ?? 0) });
      addresses.push(String(e.address));
    }
    return { buckets, addresses };
  }
  close(): void {
    this.proc.kill();
  }
}

// ── the run ──────────────────────────────────────────────────────────────────────────────────────
function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const results: Array<{ name: string; outcome: 'PASS' | 'FAIL' | 'SKIP'; detail: string }> = [];
function result(name: string, outcome: 'PASS' | 'FAIL' | 'SKIP', detail: string): void {
  results.push({ name, outcome, detail });
  console.log(`RESULT ${name} ${outcome} ${detail}`);
}

/** ucx_perftest's ucp_get of `bytes` between two processes on this GPU: MB/s (2^20 B) → GB/s, or why not. */
async function perftest(bytes: number, iterations: number, memory: string): Promise<{ gbPerSecond: number } | { why: string }> {
  const which = spawnSync('sh', ['-c', 'command -v ucx_perftest'], { encoding: 'utf8' });
  if (which.status !== 0) return { why: 'ucx_perftest not on PATH (the wheel has it: libucx/bin)' };
  const env = { ...process.env, UCX_CUDA_IPC_ENABLE_GET_ZCOPY: process.env.UCX_CUDA_IPC_ENABLE_GET_ZCOPY ?? 'on' };
  const port = String(20000 + Math.floor(Math.random() * 20000));
  const server = spawn('ucx_perftest', ['-p', port], { env, stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 1500));
  const client = spawnSync('ucx_perftest', ['127.0.0.1', '-p', port, '-t', 'ucp_get', '-m', memory, '-s', String(bytes), '-n', String(iterations)], {
    env,
    encoding: 'utf8',
    timeout: 120_000,
  });
  server.kill();
  const final = /Final:\s+(.*)$/m.exec(client.stdout ?? '');
  if (!final) return { why: `ucx_perftest printed no Final line (exit ${client.status}): ${(client.stderr || client.stdout || '').slice(-400)}` };
  // Final: iterations, latency 50%ile, average, overall, bandwidth MB/s average, overall, msg/s average, overall
  const cols = final[1].trim().split(/\s+/).map(Number);
  return { gbPerSecond: (cols[5] * MiB) / 1e9 };
}

async function main(): Promise<void> {
  const exporter = arg('exporter', 'torch') as 'torch' | 'node';
  const count = Number(arg('buckets', '8'));
  const bytes = Number(arg('bucket-mib', '256')) * MiB;
  const rounds = Number(arg('rounds', '3'));
  const seen: RobustrlMessage[] = [];
  const waiters = new Set<() => void>();
  const agents: AgentProcess[] = [];
  const onBus = (m: RobustrlMessage, from: AgentProcess) => {
    seen.push(m);
    for (const a of agents) if (a !== from) a.deliver(m);
    for (const w of [...waiters]) w();
  };
  const registry = (message: RobustrlMessage) => {
    seen.push(message);
    for (const a of agents) a.deliver(message);
  };
  const until = <T>(what: string, find: () => T | undefined, ms: number) =>
    new Promise<T>((resolve, reject) => {
      const check = () => {
        const v = find();
        if (v === undefined) return;
        clearTimeout(timer);
        waiters.delete(check);
        resolve(v);
      };
      const timer = setTimeout(() => (waiters.delete(check), reject(new Error(`timed out waiting for ${what}`))), ms);
      waiters.add(check);
      check();
    });
  const trainer = new AgentProcess('trainer-0', onBus);
  const rollout = new AgentProcess('rollout-0', onBus);
  agents.push(trainer, rollout);
  const trainerFw = new Framework(exporter);
  const rolloutFw = new Framework(exporter);
  try {
    const [trainerAddress] = await Promise.all([trainer.started(), rollout.started()]);
    const src = await trainerFw.buckets(count, bytes, 1000);
    const dst = await rolloutFw.buckets(count, bytes, 5000);
    await rollout.call('registerTarget', { name: 'slot-a', buckets: dst.buckets });
    const perRound: number[] = [];
    const publishSeconds: number[] = [];
    const getSeconds: number[] = [];
    const verifySeconds: number[] = [];
    let transfer: DataOf<'WeightPullCompleted'>['transfer'];
    for (let version = 1; version <= rounds; version++) {
      const publishing = process.hrtime.bigint();
      await trainer.call('publishDevice', { version, step: version, buckets: src.buckets });
      publishSeconds.push(Number(process.hrtime.bigint() - publishing) / 1e9);
      await until('manifest', () => seen.find((m) => m.type === 'WeightVersionPublished' && (m.data as { version: number }).version === version), 30_000);
      const started = process.hrtime.bigint();
      for (let b = 0; b < count; b++)
        registry(
          createMessage(
            'WeightPullAssigned',
            { pullId: `v${version}/b${b}`, version, bucketIndex: b, pullerId: 'rollout-0', sourceId: 'trainer-0', sourceAddress: trainerAddress },
            { jobId: JOB, source: 'weight-registry', occurredAt: new Date().toISOString() },
          ) as RobustrlMessage,
        );
      const outcomes = await until(
        `round ${version}`,
        () => {
          const done = seen.filter(
            (m): m is MessageOf<'WeightPullCompleted' | 'WeightPullFailed'> =>
              (m.type === 'WeightPullCompleted' || m.type === 'WeightPullFailed') && (m.data as { version: number }).version === version,
          );
          return done.length === count ? done : undefined;
        },
        300_000,
      );
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const failed = outcomes.filter((o) => o.type === 'WeightPullFailed');
      if (failed.length) {
        result(`agent-pull-round-${version}`, 'FAIL', `${failed.length} of ${count} buckets failed: ${(failed[0].data as { reason: string }).reason}`);
        break;
      }
      const completed = outcomes as Array<MessageOf<'WeightPullCompleted'>>;
      transfer = completed[0].data.transfer;
      for (const c of completed) {
        getSeconds.push((c.data.transfer?.getMicros ?? 0) / 1e6);
        verifySeconds.push((c.data.transfer?.verifyMicros ?? 0) / 1e6);
      }
      perRound.push((count * bytes) / seconds / 1e9);
      if (version === 1) {
        const mismatched: number[] = [];
        for (let b = 0; b < count; b++) {
          const a = await trainerFw.call({ op: 'digest', address: src.addresses[b], offset: b % 2 === 1 ? 4096 : 0, length: bytes });
          const z = await rolloutFw.call({ op: 'digest', address: dst.addresses[b], offset: b % 2 === 1 ? 4096 : 0, length: bytes });
          if (a.sha256 !== z.sha256) mismatched.push(b);
        }
        result(
          'agent-pull-byte-exact',
          mismatched.length === 0 ? 'PASS' : 'FAIL',
          mismatched.length === 0 ? `${count} buckets of ${bytes / MiB} MiB: sha256 equal on both sides` : `buckets ${mismatched.join(', ')} differ`,
        );
        const device = transfer?.localMemory !== 'host' && transfer?.sourceMemory !== 'host';
        result(
          'agent-pull-device-to-device',
          device && !transfer?.emulated ? 'PASS' : exporter === 'node' && transfer?.localMemory === 'host' ? 'SKIP' : 'FAIL',
          `memory ${transfer?.sourceMemory} → ${transfer?.localMemory}, protocol: ${transfer?.protocol ?? 'not described'}${transfer?.emulated ? ' (EMULATED)' : ''}`,
        );
      }
      registry(
        createMessage('WeightVersionRetired', { version }, { jobId: JOB, source: 'weight-registry', occurredAt: new Date().toISOString() }) as RobustrlMessage,
      );
      await new Promise((r) => setTimeout(r, 200));
    }
    if (perRound.length) {
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
      const agentGbps = median(perRound);
      const perBucket = bytes / median(getSeconds) / 1e9;
      console.log(
        `BENCH agent pull (${count} × ${bytes / MiB} MiB buckets, ${perRound.length} rounds): ${perBucket.toFixed(1)} GB/s moving a bucket (its GETs, median), ` +
          `${(median(verifySeconds) * 1e3).toFixed(2)} ms verifying it, ${agentGbps.toFixed(1)} GB/s per round (assignment → completion event, control messages included)`,
      );
      const copy = await rolloutFw.call({ op: 'copyBench', bytes, iterations: 20 });
      const copyGbps = Number(copy.gbPerSecond);
      console.log(`BENCH device copy (${copy.via as string}, ${bytes / MiB} MiB): ${copyGbps.toFixed(1)} GB/s`);
      // The trainer agent copies each bucket into its own memory before serving it (native/ucx/README.md "GPU").
      console.log(
        `BENCH publish (the agent's device copy of ${count} × ${bytes / MiB} MiB and their sampled checksums, median of ${publishSeconds.length}): ` +
          `${(median(publishSeconds) * 1000).toFixed(1)} ms, ${((count * bytes) / median(publishSeconds) / 1e9).toFixed(1)} GB/s`,
      );
      const perf = await perftest(bytes, 20, arg('perftest-memory', 'cuda'));
      if ('why' in perf) result('bench-ucx-perftest', 'SKIP', perf.why);
      else console.log(`BENCH ucx_perftest ucp_get -m ${arg('perftest-memory', 'cuda')} (${bytes / MiB} MiB): ${perf.gbPerSecond.toFixed(1)} GB/s`);
      const perfGbps = 'why' in perf ? null : perf.gbPerSecond;
      const ratio = (x: number, y: number | null) => (y ? (x / y).toFixed(2) : 'n/a');
      console.log(
        `BENCH ratios, moving a bucket: agent/ucx_perftest ${ratio(perBucket, perfGbps)} (goal ≥ 0.9), agent/device copy ${ratio(perBucket, copyGbps)} (goal ≥ 0.6); ` +
          `per round: ${ratio(agentGbps, perfGbps)} / ${ratio(agentGbps, copyGbps)}`,
      );
      result('bench-agent-pull', 'PASS', `${perBucket.toFixed(1)} GB/s moving a bucket, ${agentGbps.toFixed(1)} GB/s per round`);
    }
  } catch (err) {
    result('agent-pull', 'FAIL', err instanceof Error ? err.message : String(err));
  } finally {
    trainer.stop();
    rollout.stop();
    trainerFw.close();
    rolloutFw.close();
  }
  process.exitCode = results.some((r) => r.outcome === 'FAIL') ? 1 : 0;
}

if (process.argv[2] === '--agent') void runAgent(process.argv[3]);
else void main();
