import { EngineKind } from './engines';
import { RobustrlError } from '@robustrl/bus';

/**
 * Drives an existing SGLang Model Gateway (sgl-router) the way its operators do, so robustrl can keep an
 * external router's membership right instead of routing itself. Both API generations:
 * the REST one (`POST /workers`, `DELETE /workers/{url}`, `GET /workers`; newer gateways answer 202 and
 * apply in the background) and the legacy one (`/add_worker?url=`, `/remove_worker?url=`,
 * `/list_workers`), used when the gateway has no REST route (404 without a JSON error). Shapes in
 * docs/engine-api-shapes.md §3; the router's own membership API (worker-membership.ts) speaks the same.
 *
 * Idempotent both ways: adding a worker the gateway has, or removing one it has not, is not an error —
 * a mirror that retries after a crash must not fail on what it did before.
 */
export class ModelGatewayError extends RobustrlError {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

export interface WorkerSpec {
  url: string;
  runtime?: EngineKind;
  /** The GPU machine it runs on (the gateway keeps it as a label). */
  machineId?: string;
}

export class ModelGatewayClient {
  private readonly base: string;

  constructor(
    baseUrl: string,
    private readonly options: { apiKey?: string; timeoutMs?: number } = {},
  ) {
    this.base = baseUrl.replace(/\/+$/, '');
  }

  async addWorker(worker: WorkerSpec): Promise<void> {
    const body = {
      url: worker.url,
      ...(worker.runtime ? { runtime: worker.runtime === 'llama.cpp' ? 'llamacpp' : worker.runtime } : {}),
      ...(worker.machineId ? { labels: { machine_id: worker.machineId } } : {}),
    };
    const res = await this.call('POST', '/workers', body);
    if (res.status === 200 || res.status === 201 || res.status === 202) return;
    if (isMissingRoute(res)) {
      const legacy = await this.call('POST', `/add_worker?url=${encodeURIComponent(worker.url)}`, null);
      if (legacy.status === 200 || /already exists/i.test(legacy.text)) return;
      throw new ModelGatewayError(`the gateway refused to add ${worker.url}: ${legacy.status} ${legacy.text}`, legacy.status);
    }
    if (/already exists/i.test(res.text)) return;
    throw new ModelGatewayError(`the gateway refused to add ${worker.url}: ${res.status} ${res.text}`, res.status);
  }

  async removeWorker(url: string): Promise<void> {
    const res = await this.call('DELETE', `/workers/${encodeURIComponent(url)}`, null);
    if (res.status === 200 || res.status === 202 || res.status === 204) return;
    if (res.status === 404 && !isMissingRoute(res)) return; // WORKER_NOT_FOUND: already gone
    if (isMissingRoute(res)) {
      const legacy = await this.call('POST', `/remove_worker?url=${encodeURIComponent(url)}`, null);
      if (legacy.status === 200 || /not found/i.test(legacy.text)) return;
      throw new ModelGatewayError(`the gateway refused to remove ${url}: ${legacy.status} ${legacy.text}`, legacy.status);
    }
    throw new ModelGatewayError(`the gateway refused to remove ${url}: ${res.status} ${res.text}`, res.status);
  }

  /** The workers' URLs. */
  async listWorkers(): Promise<string[]> {
    const res = await this.call('GET', '/workers', null);
    if (res.status === 200 && Array.isArray((res.json as { workers?: unknown })?.workers)) {
      return ((res.json as { workers: Array<{ url?: unknown }> }).workers ?? []).map((w) => String(w.url));
    }
    if (!isMissingRoute(res)) throw new ModelGatewayError(`the gateway did not list its workers: ${res.status} ${res.text}`, res.status);
    const legacy = await this.call('GET', '/list_workers', null);
    const urls = (legacy.json as { urls?: unknown } | null)?.urls;
    if (legacy.status !== 200 || !Array.isArray(urls))
      throw new ModelGatewayError(`the gateway did not list its workers: ${legacy.status} ${legacy.text}`, legacy.status);
    return urls.map(String);
  }

  private async call(method: string, path: string, body: unknown): Promise<{ status: number; text: string; json: unknown }> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: {
        ...(body !== null ? { 'content-type': 'application/json' } : {}),
        ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
      },
      body: body === null ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
    });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
    return { status: res.status, text, json };
  }
}

/** A 404/405 that is not the gateway's JSON error: the route does not exist (an older gateway). */
function isMissingRoute(res: { status: number; json: unknown }): boolean {
  if (res.status === 405) return true;
  if (res.status !== 404) return false;
  const code = (res.json as { code?: unknown } | null)?.code;
  return typeof code !== 'string';
}
