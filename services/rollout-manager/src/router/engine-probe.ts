import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { adapterFor } from './engines/adapters';
import type { EngineKind } from './engines/engine-adapter';

/**
 * GET /health (vLLM, SGLang, llama.cpp); an engine without it (404) is asked GET /v1/models. 2xx within
 * the timeout = alive. A deep probe (the engine failed a request) then runs its adapter's one-token
 * generation (engines/), with at least GENERATE_PROBE_TIMEOUT_MS (a queue behind running requests is
 * not death), and wants an answer below 500.
 */
export const httpProbe = async (engine: { baseUrl: string; kind: EngineKind }, timeoutMs: number, deep: boolean): Promise<boolean> => {
  const health = await httpStatus(`${engine.baseUrl}/health`, 'GET', null, timeoutMs);
  const alive = health === 404 ? isOk(await httpStatus(`${engine.baseUrl}/v1/models`, 'GET', null, timeoutMs)) : isOk(health);
  if (!alive || !deep) return alive;
  const probe = adapterFor(engine.kind).generateProbe;
  const generated = await httpStatus(`${engine.baseUrl}${probe.path}`, probe.method, probe.body, Math.max(timeoutMs, GENERATE_PROBE_TIMEOUT_MS));
  // A 4xx is the engine refusing the probe's request (no completions endpoint, a model name it wants):
  // it answered, which a wedged engine does not. Only no answer or a 5xx keeps it out.
  return generated !== null && generated < 500;
};

export const GENERATE_PROBE_TIMEOUT_MS = 10_000;

const isOk = (status: number | null) => status !== null && status >= 200 && status < 300;

function httpStatus(url: string, method: 'GET' | 'POST', body: unknown, timeoutMs: number): Promise<number | null> {
  return new Promise((resolve) => {
    const request = url.startsWith('https:') ? httpsRequest : httpRequest;
    const payload = body === null ? null : JSON.stringify(body);
    const headers = payload === null ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) };
    // A fresh connection per probe (agent: false): a pooled keep-alive socket would prove nothing about the server now.
    const req = request(url, { method, headers, agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? null));
      res.on('error', () => resolve(null));
    });
    req.on('timeout', () => req.destroy(new Error('probe timed out')));
    req.on('error', () => resolve(null));
    req.end(payload ?? undefined);
  });
}
