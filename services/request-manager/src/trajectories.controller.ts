import {
  BadRequestException,
  Body,
  ConflictException,
  Controller,
  Get,
  HttpCode,
  Inject,
  NotFoundException,
  Param,
  Post,
  Query,
  UseFilters,
} from '@nestjs/common';
import { z } from 'zod';
import {
  AppendResponse,
  AppendResult,
  BatchProgressResponse,
  CompletedBatchQuery,
  CompletedBatchResponse,
  NewTrajectories,
  NewTrajectory,
  StartResponse,
  StatusChange,
  StatusResult,
  TrajectoryPrefix,
  TrajectoryWithTurns,
  TurnBatch,
  TurnBody,
  TurnInput,
} from '@robustrl/contracts';
import { StoreUnavailableFilter } from './store-unavailable.filter';
import { InvalidTransitionError, TrajectoryNotFoundError, TrajectoryStore, TurnRejectedError, TurnWriter } from '@robustrl/trajectory-store';

/**
 * The request manager's HTTP API: AgentWorkers store every tool iteration here, the rollout manager
 * reads prefixes to continue a trajectory elsewhere, a (restarted) trainer fetches its batch (paper §3,
 * §5.1.2, §5.2.2). Every body and query is validated; a bad one gets a 400 naming each problem.
 * Turn appends go through the TurnWriter, so concurrent requests share one batched statement.
 */
// Bodies, queries and answers are the contract's (libs/contracts http/trajectory-api.ts), shared with the router.
// One or many: `{ trajectories: [...] }` / `{ turns: [...] }`, else the body is one item. Picked by key
// rather than z.union, so a 400 names the field at fault instead of "no union member matched".
const hasKey = (body: unknown, key: string) => typeof body === 'object' && body !== null && key in body;

function parse<T extends z.ZodType>(schema: T, input: unknown, what = 'request body'): z.infer<T> {
  const result = schema.safeParse(input ?? {});
  if (!result.success) {
    throw new BadRequestException({
      error: `invalid ${what}`,
      issues: result.error.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message })),
    });
  }
  return result.data;
}

function mapStoreError(err: unknown): never {
  if (err instanceof TrajectoryNotFoundError) throw new NotFoundException({ error: err.message });
  if (err instanceof InvalidTransitionError) throw new ConflictException({ error: err.message, from: err.from, to: err.to });
  throw err;
}

@Controller('v1')
@UseFilters(StoreUnavailableFilter)
export class TrajectoriesController {
  constructor(
    @Inject(TrajectoryStore) private readonly store: TrajectoryStore,
    @Inject(TurnWriter) private readonly writer: TurnWriter,
  ) {}

  /** Start one trajectory or many (`{ trajectories: [...] }`); idempotent per trajectory id. */
  @Post('trajectories')
  @HttpCode(200)
  async start(@Body() body: unknown): Promise<StartResponse> {
    const list = hasKey(body, 'trajectories') ? parse(NewTrajectories, body).trajectories : [parse(NewTrajectory, body)];
    const results = await this.store.startTrajectories(list);
    const conflicts = results.filter((r) => r.outcome === 'conflict');
    if (conflicts.length > 0) {
      throw new ConflictException({ error: 'another trajectory id holds the same job, batch, prompt and sample index', results });
    }
    return { results };
  }

  /**
   * Append one turn or many (`{ turns: [...] }`). 200 when every turn is durable (`new` or `duplicate`:
   * a retried request is harmless); 404 when the trajectory is unknown; 409 naming the refused turns.
   */
  @Post('trajectories/:id/turns')
  @HttpCode(200)
  async appendTurns(@Param('id') trajectoryId: string, @Body() body: unknown): Promise<AppendResponse> {
    const given = hasKey(body, 'turns') ? parse(TurnBatch, body).turns : [parse(TurnBody, body)];
    const turns: TurnInput[] = given.map((t) => ({ ...t, trajectoryId }));
    const settled = await Promise.allSettled(turns.map((t) => this.writer.append(t)));
    // Anything but a refused turn (e.g. the database is down) is the call's failure, not a turn's outcome.
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected' && !(s.reason instanceof TurnRejectedError));
    if (failed) throw failed.reason;
    const results: AppendResult[] = settled.map((s, i) => ({
      turnId: turns[i].turnId,
      outcome: s.status === 'fulfilled' ? s.value : (s.reason as TurnRejectedError).outcome,
    }));
    if (results.some((r) => r.outcome === 'unknown-trajectory')) throw new NotFoundException({ error: `trajectory '${trajectoryId}' is not stored`, results });
    if (results.some((r) => r.outcome !== 'new' && r.outcome !== 'duplicate')) throw new ConflictException({ error: 'some turns were not stored', results });
    return { results };
  }

  @Post('trajectories/:id/status')
  @HttpCode(200)
  async setStatus(@Param('id') trajectoryId: string, @Body() body: unknown): Promise<StatusResult> {
    const b = parse(StatusChange, body);
    return this.store.setStatus(trajectoryId, b).catch(mapStoreError);
  }

  @Get('trajectories/:id')
  async trajectory(@Param('id') trajectoryId: string): Promise<TrajectoryWithTurns> {
    const found = await this.store.trajectory(trajectoryId);
    if (!found) throw new NotFoundException({ error: `trajectory '${trajectoryId}' is not stored` });
    return found;
  }

  /** The prompt and the turns so far: what a continuation on another rollout starts from. */
  @Get('trajectories/:id/prefix')
  async prefix(@Param('id') trajectoryId: string): Promise<TrajectoryPrefix> {
    return this.store.prefix(trajectoryId).catch(mapStoreError);
  }

  @Get('jobs/:jobId/batches/:batchId')
  async progress(@Param('jobId') jobId: string, @Param('batchId') batchId: string): Promise<BatchProgressResponse> {
    return { jobId, batchId, ...(await this.store.batchProgress(jobId, batchId)) };
  }

  /** For a (restarted) trainer: the batch's completed trajectories within the staleness bound, with turns. */
  @Get('jobs/:jobId/batches/:batchId/completed')
  async completed(@Param('jobId') jobId: string, @Param('batchId') batchId: string, @Query() query: unknown): Promise<CompletedBatchResponse> {
    const q = parse(CompletedBatchQuery, query, 'query');
    const batch = await this.store.completedOfBatch(jobId, batchId, {
      currentWeightVersion: q.currentWeightVersion,
      acceptance: { maxStaleness: q.maxStaleness },
    });
    return { jobId, batchId, currentWeightVersion: q.currentWeightVersion, maxStaleness: q.maxStaleness, ...batch };
  }
}
