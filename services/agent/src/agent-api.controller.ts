import {
  BadRequestException,
  Body,
  ConflictException,
  Controller,
  Delete,
  Get,
  HttpCode,
  Inject,
  NotFoundException,
  Param,
  Post,
  Put,
  Query,
  ServiceUnavailableException,
} from '@nestjs/common';
import { z } from 'zod';
import { CompletedBatchQuery, FaultSignal, manifestProblems, RolePhase, WeightShardRef, WeightTensor } from '@robustrl/contracts';
import { AgentRuntime } from './agent-runtime';
import { ENGINE_NAME, engineIdOf, MAX_ENGINES } from './engine-endpoints';
import { KeptBatchUnavailableError } from './kept-batch';
import { WeightTransferUnavailableError } from './weights/weight-plane';

/** One bucket in device memory, as python/robustrl_weights exports it (a CUDA IPC handle, base64). */
const IpcBucket = z.object({
  sizeBytes: z.int().positive(),
  handle: z.base64().refine((h) => Buffer.from(h, 'base64').length === 64, 'the 64 bytes of a CUDA IPC memory handle, base64'),
  offset: z.int().nonnegative().default(0),
  device: z.int().nonnegative().default(0),
});

/**
 * The local HTTP API the RL framework talks to (documented in docs/integrators/agent-api.md with curl examples, and
 * wrapped by `clients/python/robustrl_agent.py`). Every body is validated; a bad one gets a 400 that
 * names each problem, and nothing is published.
 */
const Step = z.int().nonnegative();
const Bodies = {
  phase: z.object({ phase: RolePhase, step: Step }),
  stepBegin: z.object({ step: Step, batchId: z.string().min(1) }),
  stepEnd: z.object({ step: Step, batchId: z.string().min(1), durationMs: z.int().nonnegative() }),
  checkpoint: z.object({ step: Step, uri: z.string().min(1), blockingMs: z.int().nonnegative() }),
  throughput: z.object({
    windowSeconds: z.number().positive(),
    tokensPerSecond: z.number().nonnegative(),
    completedRequests: z.int().nonnegative(),
    inFlightRequests: z.int().nonnegative(),
    awaitingTools: z.int().nonnegative(),
    rolloutId: z.string().min(1).optional(),
  }),
  gpuActivity: z.object({
    tensorActive: z.number().min(0).max(1),
    intervalSeconds: z.number().positive().optional(),
    perGpu: z.array(z.number().min(0).max(1)).optional(),
  }),
  // process-exited is the agent's own report of a process it supervises; a cooperating framework reports its own.
  error: z.object({
    signal: FaultSignal,
    detail: z.string().max(4000),
    exitCode: z.int().nullable().default(null),
    // A notice's time left (node-draining: a drain's or a preemption's deadline), in seconds from now.
    departsInSeconds: z.number().nonnegative().optional(),
  }),
  /**
   * A trainer rank's shard of a version in /dev/shm (shmName + bucketSizes), or in device memory (buckets
   * as CUDA IPC handles); optionally the named tensors in its buckets and which shard of how many it is
   * (docs/integrators/weights.md: what a manifest holds). Without `shard`: the only one.
   */
  publishWeights: z.union([
    z
      .object({
        version: z.int().nonnegative(),
        step: Step,
        shmName: z.string().regex(/^[A-Za-z0-9._-]+$/, 'a file name in the shared-memory directory (/dev/shm)'),
        bucketSizes: z.array(z.int().nonnegative()).min(1),
        tensors: z.array(WeightTensor).optional(),
        shard: WeightShardRef.optional(),
      })
      .superRefine((b, ctx) => manifestIssues(b.bucketSizes, b, ctx)),
    z
      .object({
        version: z.int().nonnegative(),
        step: Step,
        buckets: z.array(IpcBucket).min(1),
        tensors: z.array(WeightTensor).optional(),
        shard: WeightShardRef.optional(),
      })
      .superRefine((b, ctx) =>
        manifestIssues(
          b.buckets.map((x) => x.sizeBytes),
          b,
          ctx,
        ),
      ),
  ]),
  weightTarget: z.object({ buckets: z.array(IpcBucket).min(1) }),
  engines: z.object({
    engines: z
      .array(
        z.object({
          name: z.string().regex(ENGINE_NAME, "letters, digits, '.', '_' or '-' (the engine's id is <machine>/<name>)"),
          url: z.url({ protocol: /^https?$/, error: "the engine's base URL, http(s)://host:port" }),
        }),
      )
      .min(1)
      .max(MAX_ENGINES)
      .refine((es) => new Set(es.map((e) => e.name)).size === es.length, { message: 'engine names must be distinct' }),
  }),
};

/** Every tensor inside a bucket that exists, names unique, the shard inside its count: else a 400 naming each. */
function manifestIssues(sizes: number[], b: { tensors?: WeightTensor[]; shard?: WeightShardRef }, ctx: z.RefinementCtx): void {
  const buckets = sizes.map((sizeBytes, index) => ({ index, sizeBytes }));
  for (const p of manifestProblems({ buckets, tensors: b.tensors, shard: b.shard })) ctx.addIssue({ code: 'custom', path: p.path, message: p.message });
}

/** Weight transfer needs the native UCX module: without it the weight endpoints answer 503 with why. */
async function weightCall<T>(call: () => T | Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof WeightTransferUnavailableError) throw new ServiceUnavailableException({ error: err.message });
    if (err instanceof RangeError) throw new BadRequestException({ error: err.message });
    throw err;
  }
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const result = schema.safeParse(body ?? {});
  if (!result.success) {
    throw new BadRequestException({
      error: 'invalid request body',
      issues: result.error.issues.map((i) => ({ path: i.path.join('.') || '(body)', message: i.message })),
    });
  }
  return result.data;
}

const accepted = (eventId: string) => ({ accepted: true, eventId });

@Controller('v1')
export class AgentApiController {
  constructor(@Inject(AgentRuntime) private readonly agent: AgentRuntime) {}

  @Get('status')
  status() {
    return this.agent.status();
  }

  /**
   * A restarted trainer: the step it retries, the checkpoint to reload, the batch it keeps and
   * its group — members in rank order, its rank, where the group meets (rank 0's host and the job's port).
   * 404 before this machine carried out a group restart.
   */
  @Get('restart')
  restart() {
    if (!this.agent.restart) throw new NotFoundException({ error: 'this machine has not been restarted by the controller' });
    return this.agent.restart;
  }

  /**
   * What a trainer launches with (a launcher such as `python -m robustrl.torchrun` asks before it starts
   * its processes): its group — rank, world size, rendezvous — and the launcher environment; after a
   * group restart, that restart's. 503 while the first launch's group gathers (ROBUSTRL_TRAINER_WORLD_SIZE
   * trainers registered), 404 when this agent forms none (no ROBUSTRL_TRAINER_WORLD_SIZE, not a trainer).
   */
  @Get('launch')
  launch() {
    const launch = this.agent.launch();
    if (launch) return launch;
    if (this.agent.role !== 'trainer' || this.agent.config.trainerWorldSize === null)
      throw new NotFoundException({ error: 'this agent forms no trainer group: a trainer with ROBUSTRL_TRAINER_WORLD_SIZE does' });
    throw new ServiceUnavailableException({
      error: `the trainer group is not formed yet: waiting for ${this.agent.config.trainerWorldSize} trainer machines of the job to register`,
    });
  }

  /**
   * The kept batch of that restart, from the request manager: its completed trajectories within the
   * staleness bound, with their turns (`currentWeightVersion` and `maxStaleness` as the trainer fetches).
   */
  @Get('restart/batch')
  async restartBatch(@Query() query: unknown) {
    const q = parse(CompletedBatchQuery, query);
    if (!this.agent.restart) throw new NotFoundException({ error: 'this machine has not been restarted by the controller' });
    if (!this.agent.restart.batchId) throw new NotFoundException({ error: 'the restart kept no batch: the retried step had not begun on one' });
    try {
      return await this.agent.keptBatch(q);
    } catch (err) {
      if (err instanceof KeptBatchUnavailableError) throw new ServiceUnavailableException({ error: err.message });
      throw err;
    }
  }

  @Post('phase')
  @HttpCode(202)
  async phase(@Body() body: unknown) {
    const b = parse(Bodies.phase, body);
    return accepted(await this.agent.reportPhase(b.phase, b.step));
  }

  @Post('steps/begin')
  @HttpCode(202)
  async stepBegin(@Body() body: unknown) {
    const b = parse(Bodies.stepBegin, body);
    return accepted(await this.agent.emit('TrainingStepStarted', { step: b.step, batchId: b.batchId, startedAt: new Date().toISOString() }));
  }

  @Post('steps/end')
  @HttpCode(202)
  async stepEnd(@Body() body: unknown) {
    const b = parse(Bodies.stepEnd, body);
    return accepted(await this.agent.emit('TrainingStepCompleted', b));
  }

  @Post('checkpoints')
  @HttpCode(202)
  async checkpoint(@Body() body: unknown) {
    const b = parse(Bodies.checkpoint, body);
    return accepted(await this.agent.checkpointSaved(b));
  }

  @Post('throughput')
  @HttpCode(202)
  async throughput(@Body() body: unknown) {
    const b = parse(Bodies.throughput, body);
    const { rolloutId, ...sample } = b;
    return accepted(
      await this.agent.emit('RolloutThroughputSampled', {
        machineId: this.agent.config.machineId,
        rolloutId: rolloutId ?? this.agent.config.machineId,
        sampledAt: new Date().toISOString(),
        ...sample,
      }),
    );
  }

  @Post('gpu-activity')
  @HttpCode(202)
  gpuActivity(@Body() body: unknown) {
    const b = parse(Bodies.gpuActivity, body);
    if (!this.agent.pushGpuActivity(b.tensorActive, b.perGpu)) {
      throw new ConflictException({
        error: `this agent reads GPU activity from ${this.agent.status().gpuActivitySource.kind}; framework reports are not used`,
      });
    }
    // Published with the next sample, at the agent's sampling interval.
    return { accepted: true, eventId: null };
  }

  @Post('errors')
  @HttpCode(202)
  async error(@Body() body: unknown) {
    const b = parse(Bodies.error, body);
    if (b.signal === 'process-exited' && !this.agent.mailbox)
      throw new BadRequestException({
        error: 'invalid request body',
        issues: [
          { path: 'signal', message: 'process-exited is reported by the agent itself for the role process it supervises (ROBUSTRL_INTEGRATION=supervise)' },
        ],
      });
    const eventId = await this.agent.emit('AgentFaultSignalled', {
      machineId: this.agent.config.machineId,
      role: this.agent.role,
      signal: b.signal,
      detail: b.detail,
      exitCode: b.exitCode,
      observedAt: new Date().toISOString(),
      ...(b.departsInSeconds !== undefined ? { departsInMs: Math.round(b.departsInSeconds * 1000) } : {}),
    });
    if (b.signal === 'node-draining') this.agent.departureAnnounced();
    return accepted(eventId);
  }

  // ── weights (paper §5.2.1): the framework hands versions over through named /dev/shm regions ─────
  /**
   * Rollout, cooperate mode: the engines the framework started on this machine, each its name and URL
   * (docs/integrators/engines.md); PUT again replaces them. The machine registers again with them.
   */
  @Put('engines')
  async putEngines(@Body() body: unknown) {
    const b = parse(Bodies.engines, body);
    const engines = b.engines.map((e) => ({ engineId: engineIdOf(this.agent.config.machineId, e.name), url: e.url.replace(/\/+$/, '') }));
    await this.agent.setEngines(engines);
    return { engines };
  }

  @Get('weights')
  weights() {
    return this.agent.weights.status();
  }

  /**
   * Trainer: a rank's shard of version `version` is in /dev/shm/<shmName>, buckets back to back, or in
   * device memory, one CUDA IPC handle per bucket (`buckets`); publish its manifest (with its named
   * `tensors` and which `shard` it is, when given).
   */
  @Post('weights/versions')
  @HttpCode(202)
  async publishWeights(@Body() body: unknown) {
    const b = parse(Bodies.publishWeights, body);
    return weightCall(() => ('buckets' in b ? this.agent.weights.publishDevice(b) : this.agent.weights.publish(b)));
  }

  /** Rollout: device buffers (CUDA IPC handles, one per bucket) to pull versions into; PUT again replaces them. */
  @Put('weights/targets/:name')
  async putWeightTarget(@Param('name') name: string, @Body() body: unknown) {
    const b = parse(Bodies.weightTarget, body);
    return weightCall(() => this.agent.weights.registerTarget({ name, buckets: b.buckets }));
  }

  /** Rollout: the framework takes a target's buffers back (a version held there is no longer served). */
  @Delete('weights/targets/:name')
  async deleteWeightTarget(@Param('name') name: string) {
    const removed = await weightCall(() => this.agent.weights.removeTarget(name));
    if (!removed) throw new NotFoundException({ error: `no pull target ${name}` });
    return { removed: name };
  }

  /**
   * Rollout: the newest version held whole — every shard — and where to load it from: `parts`, one per
   * shard in shard order (its region, bucket layout and named tensors); a version of one shard also keeps
   * its `path` (or `target`) at the top.
   */
  @Get('weights/latest')
  async latestWeights() {
    const latest = await weightCall(() => this.agent.weights.latest());
    if (!latest) throw new NotFoundException({ error: 'no version held whole yet' });
    return latest;
  }

  /** Trainer (async mode): `trainerReleased` turns true once the first relay holds the version (resume training). */
  @Get('weights/versions/:version')
  weightVersion(@Param('version') version: string) {
    const v = Number(version);
    if (!Number.isInteger(v) || v < 0) throw new BadRequestException({ error: `not a version number: ${version}` });
    return this.agent.weights.versionStatus(v);
  }
}
