import { Logger } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { createMessage, RobustrlMessage } from '@robustrl/contracts';
import { z } from 'zod';
import { EnginePool, EngineSpec, HttpTrajectoryRecorder, OpenAiRouter, ThroughputMeter } from './router';

export interface RouterConfig {
  jobId: string;
  port: number;
  host: string;
  engines: EngineSpec[];
  /** The request manager's base URL; without it the router serves and fails over but records nothing. */
  requestManagerUrl: string | null;
  throughputSeconds: number;
}

const Engine = /^(?<id>[^=@,\s]+)(@(?<machine>[^=,\s]+))?=(?<url>https?:\/\/\S+)$/;

/**
 * The router is on when ROBUSTRL_ROUTER_ENGINES lists the job's engines (`id=url` or
 * `id@machine=url`, comma separated). ROBUSTRL_ROUTER_PORT (default 8000), ROBUSTRL_ROUTER_HOST
 * (default 0.0.0.0: agent loops run elsewhere), ROBUSTRL_REQUEST_MANAGER_URL, ROBUSTRL_JOB_ID,
 * ROBUSTRL_THROUGHPUT_SECONDS (default 10).
 */
export function routerConfigFromEnv(env: NodeJS.ProcessEnv): RouterConfig | null {
  const list = env.ROBUSTRL_ROUTER_ENGINES?.trim();
  if (!list) return null;
  const engines = list.split(',').map((item) => {
    const m = Engine.exec(item.trim());
    if (!m?.groups) throw new Error(`ROBUSTRL_ROUTER_ENGINES: '${item}' is not id=url or id@machine=url`);
    return { id: m.groups.id, machineId: m.groups.machine ?? m.groups.id, baseUrl: m.groups.url };
  });
  if (!env.ROBUSTRL_JOB_ID) throw new Error('ROBUSTRL_JOB_ID is required with ROBUSTRL_ROUTER_ENGINES: the job the engines serve');
  const port = z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .safeParse(env.ROBUSTRL_ROUTER_PORT ?? '8000');
  if (!port.success) throw new Error(`ROBUSTRL_ROUTER_PORT must be a port number, got '${env.ROBUSTRL_ROUTER_PORT}'`);
  const seconds = z.coerce
    .number()
    .positive()
    .safeParse(env.ROBUSTRL_THROUGHPUT_SECONDS ?? '10');
  if (!seconds.success) throw new Error(`ROBUSTRL_THROUGHPUT_SECONDS must be a positive number, got '${env.ROBUSTRL_THROUGHPUT_SECONDS}'`);
  return {
    jobId: env.ROBUSTRL_JOB_ID,
    port: port.data,
    host: env.ROBUSTRL_ROUTER_HOST ?? '0.0.0.0',
    engines,
    requestManagerUrl: env.ROBUSTRL_REQUEST_MANAGER_URL ?? null,
    throughputSeconds: seconds.data,
  };
}

/**
 * The router inside the rollout manager: it serves the agent loops, publishes each engine's
 * throughput for the detector, and follows the pool's decisions — an engine whose machine is
 * confirmed faulty, gone or lent to the trainer leaves the pool, and trajectories the pool
 * reassigned stick to their new engine.
 */
export class RouterRuntime {
  private readonly logger = new Logger('router');
  readonly pool: EnginePool;
  readonly router: OpenAiRouter;
  private readonly meter = new ThroughputMeter(Date.now());
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly bus: MessageBus,
    readonly config: RouterConfig,
  ) {
    this.pool = new EnginePool(config.engines, { probeIntervalMs: 5_000 });
    this.router = new OpenAiRouter({
      pool: this.pool,
      bus,
      meter: this.meter,
      source: 'rollout-manager/router',
      ...(config.requestManagerUrl ? { recorder: new HttpTrajectoryRecorder(config.requestManagerUrl) } : {}),
      logger: {
        info: (m, f) => this.logger.log(`${m} ${f ? JSON.stringify(f) : ''}`),
        warn: (m, f) => this.logger.warn(`${m} ${f ? JSON.stringify(f) : ''}`),
        error: (m, f) => this.logger.error(`${m} ${f ? JSON.stringify(f) : ''}`),
      },
    });
  }

  async start(): Promise<string> {
    this.pool.startProbing();
    const url = await this.router.listen(this.config.port, this.config.host);
    this.timer = setInterval(() => void this.publishThroughput(), this.config.throughputSeconds * 1000);
    if (!this.config.requestManagerUrl) this.logger.warn('ROBUSTRL_REQUEST_MANAGER_URL is not set: trajectories are routed but not recorded');
    this.logger.log(`routing ${this.config.engines.length} engine(s) for job ${this.config.jobId} at ${url}`);
    return url;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.router.close();
    await this.pool.stop();
  }

  /** Follow what the rollout pool decided (called by the rollout manager after each applied message). */
  follow(input: RobustrlMessage, emitted: readonly RobustrlMessage[]): void {
    if (input.jobId !== this.config.jobId) return;
    const leaving =
      input.type === 'FaultConfirmed' && input.data.handledAs === 'rollout'
        ? input.data.machineId
        : input.type === 'MachineDeregistered'
          ? input.data.machineId
          : input.type === 'PromoteRolloutToTrainer'
            ? input.data.rolloutMachineId
            : null;
    if (leaving) {
      for (const e of this.pool.enginesOn(leaving)) {
        this.logger.warn(
          `engine ${e.id} leaves the pool: its machine ${leaving} ${input.type === 'PromoteRolloutToTrainer' ? 'is lent to the trainer' : 'stopped serving'}`,
        );
        this.pool.remove(e.id);
      }
    }
    for (const m of emitted) {
      if (m.type !== 'TrajectoriesReassigned') continue;
      for (const a of m.data.assignments) this.pool.assign(a.trajectoryId, a.toRolloutId);
    }
  }

  private async publishThroughput(): Promise<void> {
    const now = Date.now();
    const samples = this.meter.take(
      now,
      this.pool.snapshot().filter((e) => e.alive),
    );
    const messages = samples.map((s) =>
      createMessage(
        'RolloutThroughputSampled',
        {
          machineId: s.machineId,
          rolloutId: s.engineId,
          sampledAt: new Date(now).toISOString(),
          windowSeconds: s.windowSeconds,
          tokensPerSecond: s.tokensPerSecond,
          completedRequests: s.completedRequests,
          inFlightRequests: s.inFlightRequests,
          awaitingTools: s.awaitingTools,
        },
        { jobId: this.config.jobId, source: 'rollout-manager/router', occurredAt: new Date(now).toISOString() },
      ),
    );
    await this.bus.publish(messages as RobustrlMessage[]).catch((err) => this.logger.warn(`throughput not published: ${String(err)}`));
  }
}
