import { z } from 'zod';
import { ContinuationDecision, NewTrajectory, StatusChange, StatusResult, StoredTurn, TrajectorySummary, TurnBatch, TurnBody } from '@robustrl/contracts';
import {
  ContinuationRequest,
  RecordedTurn,
  RecordRefusedError,
  StoredPrefix,
  TrajectoryRecorder,
  TrajectoryStart,
  TurnConflictError,
} from './trajectory-recorder';

/**
 * What the router reads of `GET /v1/trajectories/:id/prefix` (the contract's TrajectoryPrefix): the
 * attempt, the turns, and of each turn only what it uses. Parsing no more than it uses keeps the router
 * working when the store's summary grows a field.
 */
const PrefixRead = z.object({
  trajectory: TrajectorySummary.pick({ attempt: true }),
  turns: z.array(StoredTurn.pick({ turnIndex: true, kind: true, content: true, weightVersion: true, spans: true })),
});
const StatusRead = StatusResult.pick({ continuation: true });

/**
 * The router's recorder in a deployment: the request manager's trajectory store over its HTTP API
 * (`services/request-manager`, `/v1/trajectories…`). The router and the store run on different
 * machines; the API is idempotent (trajectory ids, turn ids), so a retried call stores once.
 *
 * Bodies are built and checked with the store's own contract before they leave: a turn the store
 * would refuse with a 400 fails here, with the same consequence for the router (recording failed).
 */
export class HttpTrajectoryRecorder implements TrajectoryRecorder {
  constructor(
    private readonly baseUrl: string,
    /** `token`: the request manager's bearer token, when its API asks for one (ROBUSTRL_HTTP_TOKENS there). */
    private readonly options: { timeoutMs?: number; token?: string } = {},
  ) {}

  async start(t: TrajectoryStart): Promise<void> {
    await this.call('POST', '/v1/trajectories', NewTrajectory.parse(t));
  }

  async appendTurns(turns: RecordedTurn[]): Promise<void> {
    const byTrajectory = new Map<string, TurnBody[]>();
    for (const { trajectoryId, ...turn } of turns) byTrajectory.set(trajectoryId, [...(byTrajectory.get(trajectoryId) ?? []), turn]);
    for (const [trajectoryId, list] of byTrajectory) {
      const body: TurnBatch = TurnBatch.parse({ turns: list });
      await this.call('POST', `/v1/trajectories/${encodeURIComponent(trajectoryId)}/turns`, body);
    }
  }

  /** Two calls over HTTP: the start (idempotent), then the prefix. */
  async open(t: TrajectoryStart): Promise<StoredPrefix> {
    await this.start(t);
    return this.prefix(t.trajectoryId);
  }

  async prefix(trajectoryId: string): Promise<StoredPrefix> {
    const found = await this.call('GET', `/v1/trajectories/${encodeURIComponent(trajectoryId)}/prefix`, undefined, { notFound: null });
    if (found === null) return { attempt: 0, turns: [] };
    const read = PrefixRead.parse(found);
    return { attempt: read.trajectory.attempt, turns: read.turns };
  }

  /** `POST /v1/trajectories/:id/status` to `in-flight` on its new rollout, with the continuation: the store decides. */
  async continueWith(trajectoryId: string, request: ContinuationRequest): Promise<ContinuationDecision> {
    const body: StatusChange = StatusChange.parse({ status: 'in-flight', rolloutId: request.rolloutId, continuation: request.continuation });
    const answer = StatusRead.parse(await this.call('POST', `/v1/trajectories/${encodeURIComponent(trajectoryId)}/status`, body));
    if (answer.continuation === null) throw new Error(`request manager decided no continuation for ${trajectoryId} (it is completed or aborted)`);
    return answer.continuation;
  }

  private async call(method: 'GET' | 'POST', path: string, body: unknown, on: { notFound?: null } = {}): Promise<unknown> {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
    });
    if (res.status === 404 && 'notFound' in on) return on.notFound;
    const text = await res.text();
    // 409: the store refused turns that contradict what it holds — the router must not paper over that.
    if (res.status === 409) throw new TurnConflictError(`request manager refused ${method} ${path}: ${text}`);
    // 400, 413, 422: what the caller sent cannot be stored (a 401 or 403 is this router's own configuration).
    if (res.status === 400 || res.status === 413 || res.status === 422)
      throw new RecordRefusedError(`request manager refused ${method} ${path} (${res.status}): ${text.slice(0, 500)}`);
    if (!res.ok) throw new Error(`request manager answered ${res.status} to ${method} ${path}: ${text.slice(0, 500)}`);
    return text ? JSON.parse(text) : null;
  }
}
