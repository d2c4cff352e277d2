import { BadRequestException, Body, ConflictException, Controller, Get, HttpCode, Inject, Post } from '@nestjs/common';
import { z } from 'zod';
import { FaultSignal, RolePhase } from '@robustrl/contracts';
import { AgentRuntime } from './agent-runtime';

/**
 * The local HTTP API the RL framework talks to (documented in the README with curl examples, and
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
  gpuActivity: z.object({ tensorActive: z.number().min(0).max(1), intervalSeconds: z.number().positive().optional(), perGpu: z.array(z.number().min(0).max(1)).optional() }),
  error: z.object({ signal: FaultSignal.exclude(['process-exited']), detail: z.string().max(4000) }),
};

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
    return accepted(await this.agent.emit('CheckpointSaved', b));
  }

  @Post('throughput')
  @HttpCode(202)
  async throughput(@Body() body: unknown) {
    const b = parse(Bodies.throughput, body);
    const { rolloutId, ...sample } = b;
    return accepted(await this.agent.emit('RolloutThroughputSampled', {
      machineId: this.agent.config.machineId,
      rolloutId: rolloutId ?? this.agent.config.machineId,
      sampledAt: new Date().toISOString(),
      ...sample,
    }));
  }

  @Post('gpu-activity')
  @HttpCode(202)
  gpuActivity(@Body() body: unknown) {
    const b = parse(Bodies.gpuActivity, body);
    if (!this.agent.pushGpuActivity(b.tensorActive, b.perGpu)) {
      throw new ConflictException({ error: `this agent reads GPU activity from ${this.agent.status().gpuActivitySource.kind}; framework reports are not used` });
    }
    // Published with the next sample, at the agent's sampling interval.
    return { accepted: true, eventId: null };
  }

  @Post('errors')
  @HttpCode(202)
  async error(@Body() body: unknown) {
    const b = parse(Bodies.error, body);
    return accepted(await this.agent.emit('AgentFaultSignalled', {
      machineId: this.agent.config.machineId,
      role: this.agent.role,
      signal: b.signal,
      detail: b.detail,
      exitCode: null,
      observedAt: new Date().toISOString(),
    }));
  }
}
