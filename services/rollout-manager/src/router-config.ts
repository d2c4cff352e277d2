import { hostname } from 'node:os';
import { ContinuationPolicy } from '@robustrl/contracts';
import { HttpAuth, httpAuthFromEnv } from '@robustrl/service-kit';
import { z } from 'zod';
import { ENGINE_KINDS, EngineKind, EngineSpec, isEngineKind } from './router';

/** The router's settings (docs/operators/configuration.md), read from the environment by routerConfigFromEnv. */
export interface RouterConfig {
  jobId: string;
  port: number;
  host: string;
  /**
   * Who may call it: ROBUSTRL_ROUTER_TOKENS / _TOKENS_FILE / _AUTH (the agent loops' OpenAI API key).
   * Unset: open on loopback, refused anywhere else (http-auth.ts).
   */
  auth?: HttpAuth;
  /** The settings `auth` came from, read again when its tokens rotate (a changed file, SIGHUP). */
  authSettings?: NodeJS.ProcessEnv;
  /** Engines listed by the operator; more join as rollout machines register theirs (`inferenceUrl`, or `engines` for several). */
  engines: EngineSpec[];
  /** How many weight versions behind the newest published one an engine may be and still serve (the job's bound). */
  maxStaleness: number;
  /**
   * What a recorded trajectory whose generated turns are older than its engine's weights does: `keep` them
   * (restarting anyway when they alone are beyond maxStaleness) or `restart-from-prompt`.
   */
  continuationPolicy: ContinuationPolicy;
  /**
   * The trajectory store's PostgreSQL (ROBUSTRL_TRAJECTORY_DATABASE_URL): the router records there itself,
   * one statement for many requests (docs/router.md "Recording"). Preferred over requestManagerUrl.
   */
  trajectoryDatabaseUrl?: string | null;
  /** The request manager's base URL: recording over its HTTP API, when no trajectory database is given; without either the router records nothing. */
  requestManagerUrl: string | null;
  /** The bearer token the request manager asks for (ROBUSTRL_REQUEST_MANAGER_TOKEN), if it asks for one. */
  requestManagerToken?: string;
  throughputSeconds: number;
  /** How often each engine's request evidence (stalls, failures) goes to the detector; default 1 s. */
  evidenceSeconds?: number;
  /** The kind of every engine (the listed ones and those machines register): how to read and continue them. Default vllm. */
  engineKind?: EngineKind;
  /**
   * A router replica (ROBUSTRL_ROUTER_REPLICA=on): it routes and records, and its engines are the ones the
   * rollout manager announces (engine-announcements.ts); it decides nothing. `replicaId` names its
   * consumer group (ROBUSTRL_ROUTER_REPLICA_ID, default the host name: a pod's name).
   */
  replica?: { replicaId: string };
  /** An SGLang Model Gateway whose workers are kept equal to the engines this router routes to (ROBUSTRL_EXTERNAL_ROUTER_URL). */
  externalRouter?: { url: string; apiKey?: string };
}

const Engine = /^(?<id>[^=@,\s]+)(@(?<machine>[^=,\s]+))?=(?<url>https?:\/\/\S+)$/;

/**
 * The router is on when ROBUSTRL_ROUTER=on, or when ROBUSTRL_ROUTER_ENGINES lists engines to start
 * with (`id=url` or `id@machine=url`, comma separated); rollout machines whose agents tell their
 * engine's URL (ROBUSTRL_INFERENCE_URL) join as they come. ROBUSTRL_ROUTER_PORT (default 8000),
 * ROBUSTRL_ROUTER_HOST (default ROBUSTRL_HTTP_HOST, loopback; on a cluster the pod's address, since
 * agent loops run elsewhere — and then ROBUSTRL_ROUTER_TOKENS or _TOKENS_FILE, the loops' API key),
 * ROBUSTRL_TRAJECTORY_DATABASE_URL (the trajectory store's PostgreSQL: the router records there itself),
 * else ROBUSTRL_REQUEST_MANAGER_URL and ROBUSTRL_REQUEST_MANAGER_TOKEN (recording over its HTTP API),
 * ROBUSTRL_JOB_ID, ROBUSTRL_THROUGHPUT_SECONDS (default 10), ROBUSTRL_MAX_STALENESS (default 1; 0
 * for a synchronous job), ROBUSTRL_CONTINUATION_POLICY (keep, the default, or restart-from-prompt),
 * ROBUSTRL_ROUTER_ENGINE_KIND (vllm, the default, sglang or llama.cpp: the engines' API beyond OpenAI's),
 * ROBUSTRL_ROUTER_EVIDENCE_SECONDS (default 1: how often each engine's request stalls and failures are
 * reported to the detector), ROBUSTRL_EXTERNAL_ROUTER_URL and _API_KEY (an SGLang Model Gateway the
 * agent loops use instead: its workers follow the engines this router would route to).
 */
/** ROBUSTRL_TRAJECTORY_DATABASE_URL: the trajectory store's PostgreSQL, where the router records itself. */
function trajectoryDatabaseUrlFromEnv(env: NodeJS.ProcessEnv): string | null {
  const url = env.ROBUSTRL_TRAJECTORY_DATABASE_URL?.trim();
  if (!url) return null;
  if (!/^postgres(ql)?:\/\//.test(url))
    throw new Error(`ROBUSTRL_TRAJECTORY_DATABASE_URL must be a postgres:// URL, got '${url.replace(/:[^:@/]*@/, ':***@')}'`);
  return url;
}

export function routerConfigFromEnv(env: NodeJS.ProcessEnv): RouterConfig | null {
  const list = env.ROBUSTRL_ROUTER_ENGINES?.trim() ?? '';
  const replica = env.ROBUSTRL_ROUTER_REPLICA?.trim().toLowerCase();
  if (replica !== undefined && replica !== '' && replica !== 'on' && replica !== 'off')
    throw new Error(`ROBUSTRL_ROUTER_REPLICA must be on or off, got '${env.ROBUSTRL_ROUTER_REPLICA}'`);
  const on = replica === 'on' ? 'on' : env.ROBUSTRL_ROUTER?.trim().toLowerCase();
  if (on !== undefined && on !== '' && on !== 'on' && on !== 'off') throw new Error(`ROBUSTRL_ROUTER must be on or off, got '${env.ROBUSTRL_ROUTER}'`);
  if (on === 'off' || (!list && on !== 'on')) return null;
  const engines = (list ? list.split(',') : []).map((item) => {
    const m = Engine.exec(item.trim());
    if (!m?.groups) throw new Error(`ROBUSTRL_ROUTER_ENGINES: '${item}' is not id=url or id@machine=url`);
    return { id: m.groups.id, machineId: m.groups.machine ?? m.groups.id, baseUrl: m.groups.url };
  });
  if (!env.ROBUSTRL_JOB_ID) throw new Error('ROBUSTRL_JOB_ID is required with the router: the job the engines serve');
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
  const staleness = z.coerce
    .number()
    .int()
    .nonnegative()
    .safeParse(env.ROBUSTRL_MAX_STALENESS ?? '1');
  if (!staleness.success) throw new Error(`ROBUSTRL_MAX_STALENESS must be a whole number of weight versions, got '${env.ROBUSTRL_MAX_STALENESS}'`);
  const policy = ContinuationPolicy.safeParse(env.ROBUSTRL_CONTINUATION_POLICY?.trim() || 'keep');
  if (!policy.success) throw new Error(`ROBUSTRL_CONTINUATION_POLICY must be keep or restart-from-prompt, got '${env.ROBUSTRL_CONTINUATION_POLICY}'`);
  const host = env.ROBUSTRL_ROUTER_HOST?.trim() || env.ROBUSTRL_HTTP_HOST?.trim() || '127.0.0.1';
  const engineKind = env.ROBUSTRL_ROUTER_ENGINE_KIND?.trim() || 'vllm';
  if (!isEngineKind(engineKind)) throw new Error(`ROBUSTRL_ROUTER_ENGINE_KIND must be one of ${ENGINE_KINDS.join(', ')}, got '${engineKind}'`);
  const evidence = z.coerce
    .number()
    .positive()
    .safeParse(env.ROBUSTRL_ROUTER_EVIDENCE_SECONDS ?? '1');
  if (!evidence.success) throw new Error(`ROBUSTRL_ROUTER_EVIDENCE_SECONDS must be a positive number, got '${env.ROBUSTRL_ROUTER_EVIDENCE_SECONDS}'`);
  const requestManagerToken = env.ROBUSTRL_REQUEST_MANAGER_TOKEN?.trim();
  return {
    jobId: env.ROBUSTRL_JOB_ID,
    port: port.data,
    host,
    auth: httpAuthFromEnv(env, host, 'ROBUSTRL_ROUTER'),
    authSettings: env,
    ...(requestManagerToken ? { requestManagerToken } : {}),
    engines,
    maxStaleness: staleness.data,
    continuationPolicy: policy.data,
    requestManagerUrl: env.ROBUSTRL_REQUEST_MANAGER_URL ?? null,
    trajectoryDatabaseUrl: trajectoryDatabaseUrlFromEnv(env),
    ...(replica === 'on' ? { replica: { replicaId: env.ROBUSTRL_ROUTER_REPLICA_ID?.trim() || hostname() } } : {}),
    throughputSeconds: seconds.data,
    evidenceSeconds: evidence.data,
    engineKind,
    ...(env.ROBUSTRL_EXTERNAL_ROUTER_URL?.trim()
      ? {
          externalRouter: {
            url: env.ROBUSTRL_EXTERNAL_ROUTER_URL.trim(),
            ...(env.ROBUSTRL_EXTERNAL_ROUTER_API_KEY ? { apiKey: env.ROBUSTRL_EXTERNAL_ROUTER_API_KEY } : {}),
          },
        }
      : {}),
  };
}
