import { PrefixTurn, RecordedTurn, TrajectoryRecorder, TrajectoryStart, TurnConflictError } from './trajectory-recorder';

/**
 * The router's recorder in a deployment: the request manager's trajectory store over its HTTP API
 * (`services/request-manager`, `/v1/trajectories…`). The router and the store run on different
 * machines; the API is idempotent (trajectory ids, turn ids), so a retried call stores once.
 */
export class HttpTrajectoryRecorder implements TrajectoryRecorder {
  constructor(
    private readonly baseUrl: string,
    private readonly options: { timeoutMs?: number } = {},
  ) {}

  async start(t: TrajectoryStart): Promise<void> {
    await this.call('POST', '/v1/trajectories', t);
  }

  async appendTurns(turns: RecordedTurn[]): Promise<void> {
    const byTrajectory = new Map<string, Array<Omit<RecordedTurn, 'trajectoryId'>>>();
    for (const { trajectoryId, ...turn } of turns) byTrajectory.set(trajectoryId, [...(byTrajectory.get(trajectoryId) ?? []), turn]);
    for (const [trajectoryId, list] of byTrajectory) {
      await this.call('POST', `/v1/trajectories/${encodeURIComponent(trajectoryId)}/turns`, { turns: list });
    }
  }

  async prefix(trajectoryId: string): Promise<PrefixTurn[]> {
    const found = (await this.call('GET', `/v1/trajectories/${encodeURIComponent(trajectoryId)}/prefix`, undefined, { notFound: null })) as
      | { turns: Array<{ turnIndex: number; kind: PrefixTurn['kind']; content: unknown }> }
      | null;
    return found ? found.turns.map((t) => ({ turnIndex: t.turnIndex, kind: t.kind, content: t.content })) : [];
  }

  private async call(method: 'GET' | 'POST', path: string, body: unknown, on: { notFound?: null } = {}): Promise<unknown> {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
    });
    if (res.status === 404 && 'notFound' in on) return on.notFound;
    const text = await res.text();
    // 409: the store refused turns that contradict what it holds — the router must not paper over that.
    if (res.status === 409) throw new TurnConflictError(`request manager refused ${method} ${path}: ${text}`);
    if (!res.ok) throw new Error(`request manager answered ${res.status} to ${method} ${path}: ${text.slice(0, 500)}`);
    return text ? JSON.parse(text) : null;
  }
}
