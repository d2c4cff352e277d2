import { RobustrlError } from '@robustrl/bus';

/**
 * The agent's side of vLLM's in-place weight load (clients/python/robustrl/vllm_extension.py states the
 * sequence and why each step is there): pause with requests kept, the robustrl worker extension reads
 * the pulled regions by their manifests, the engine stamps the version it now serves on every token,
 * the prefix cache computed by the old weights goes, generation resumes. Engine routes need
 * `VLLM_SERVER_DEV_MODE=1` and the extension (`--worker-extension-cls`).
 */
export interface EnginePart {
  path: string;
  tensors: unknown[];
  bucketStarts: number[];
}

export class EngineCallError extends RobustrlError {
  constructor(
    readonly call: string,
    readonly status: number | null,
    detail: string,
  ) {
    super(`${call} ${status === null ? 'failed' : `answered ${status}`}: ${detail}`);
  }
}

export class VllmEngineClient {
  constructor(
    private readonly baseUrl: string,
    private readonly timeoutMs = 120_000,
  ) {}

  /**
   * The version the engine serves (`default`: never stamped), or null when it does not answer. Asked
   * with a short timeout: a starting engine accepts connections before it answers, and a look that waits
   * delays the next — the one that stamps it. Its answers until then are tagged version 0 and, once
   * the job is past the staleness bound, thrown away.
   */
  async weightVersion(): Promise<string | null> {
    try {
      const res = await fetch(`${this.baseUrl}/weight_info`, { signal: AbortSignal.timeout(1_000) });
      if (res.status !== 200) return null;
      const body = (await res.json()) as { weight_version?: unknown };
      return typeof body.weight_version === 'string' ? body.weight_version : null;
    } catch {
      return null;
    }
  }

  /**
   * Requests the engine is running or has queued, and has finished so far, from its Prometheus metrics
   * (`vllm:num_requests_running`, `vllm:num_requests_waiting`, `vllm:request_success_total`, summed over
   * its engines); null when the engine does not answer or exports no request gauge.
   */
  async activity(): Promise<EngineActivity | null> {
    try {
      const res = await fetch(`${this.baseUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
      if (res.status !== 200) return null;
      return activityInMetrics(await res.text());
    } catch {
      return null;
    }
  }

  async stamp(version: number): Promise<void> {
    await this.post('/update_weight_version', { new_version: String(version) });
  }

  /** Loads a whole version from its parts; generation resumes whatever happened in between. */
  async load(version: number, parts: EnginePart[]): Promise<{ seconds: number; workers: unknown }> {
    const started = performance.now();
    await this.post('/pause?mode=keep', null);
    let workers: unknown;
    try {
      const answer = (await this.post('/collective_rpc', {
        method: 'robustrl_load_weights',
        kwargs: { parts, version },
        timeout: this.timeoutMs / 1000,
      })) as { results?: unknown } | null;
      workers = answer?.results ?? answer;
      await this.stamp(version);
      const reset = (await this.post('/reset_prefix_cache?reset_running_requests=true', null)) as { success?: boolean } | null;
      if (reset?.success === false) throw new EngineCallError('/reset_prefix_cache', 200, 'the engine kept KV blocks computed by the old weights');
    } finally {
      await this.post('/resume', null);
    }
    return { seconds: (performance.now() - started) / 1000, workers };
  }

  private async post(path: string, body: unknown): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: body === null ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new EngineCallError(path, null, err instanceof Error ? err.message : String(err));
    }
    const text = await res.text();
    if (res.status >= 400) throw new EngineCallError(path, res.status, text.slice(0, 2000));
    return text === '' ? null : (JSON.parse(text) as unknown);
  }
}

/**
 * What an engine's metrics say about its work: the requests running or waiting now (gauges), and the
 * requests it has finished so far (a counter). A gauge read every half second misses requests that take
 * a few dozen milliseconds (a short answer of a small model), so an engine answering them one after the
 * other read as idle; the counter moving between two looks shows the work the gauges missed.
 */
export interface EngineActivity {
  inFlight: number;
  /** Requests finished since the engine started (null: not exported). */
  finished: number | null;
}

const REQUEST_GAUGE = /^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})?\s+(\S+)/;
const FINISHED_COUNTER = /^vllm:request_success_total(?:\{[^}]*\})?\s+(\S+)/;

/** An engine's activity in a Prometheus text exposition of vLLM's metrics (null: no request gauge). */
export function activityInMetrics(text: string): EngineActivity | null {
  let found = false;
  let inFlight = 0;
  let finished: number | null = null;
  for (const line of text.split('\n')) {
    const gauge = REQUEST_GAUGE.exec(line);
    const counter = gauge ? null : FINISHED_COUNTER.exec(line);
    const value = Number((gauge ?? counter)?.[1]);
    if (!Number.isFinite(value)) continue;
    if (gauge) {
      found = true;
      inFlight += value;
    } else finished = (finished ?? 0) + value;
  }
  return found ? { inFlight, finished } : null;
}
