import { hostname } from 'node:os';
import { ContinuationPolicy } from '@robustrl/contracts';
import { HttpAuth, httpAuthFromEnv } from '@robustrl/service-kit';
import { EngineKind, EngineSpec } from './router';
import * as R from './router-settings';

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

/** ROBUSTRL_TRAJECTORY_DATABASE_URL: the trajectory store's PostgreSQL, where the router records itself (its error hides the password). */
function trajectoryDatabaseUrlFromEnv(env: NodeJS.ProcessEnv): string | null {
  const url = R.TRAJECTORY_DATABASE_URL.read(env);
  if (!url) return null;
  if (!/^postgres(ql)?:\/\//.test(url))
    throw new Error(`ROBUSTRL_TRAJECTORY_DATABASE_URL must be a postgres:// URL, got '${url.replace(/:[^:@/]*@/, ':***@')}'`);
  return url;
}

/**
 * The router's settings (router-settings.ts), or null when it is off: it is on with ROBUSTRL_ROUTER=on, as a
 * replica (ROBUSTRL_ROUTER_REPLICA=on), or when ROBUSTRL_ROUTER_ENGINES lists engines to start with; rollout
 * machines whose agents tell their engine's URL join as they come.
 */
export function routerConfigFromEnv(env: NodeJS.ProcessEnv): RouterConfig | null {
  const list = R.ROUTER_ENGINES.read(env) ?? '';
  const replica = R.ROUTER_REPLICA.read(env) === true;
  const on = replica ? true : R.ROUTER.read(env);
  if (on === false || (!list && on !== true)) return null;
  const engines = (list ? list.split(',') : []).map((item) => {
    const m = Engine.exec(item.trim());
    if (!m?.groups) throw new Error(`ROBUSTRL_ROUTER_ENGINES: '${item}' is not id=url or id@machine=url`);
    return { id: m.groups.id, machineId: m.groups.machine ?? m.groups.id, baseUrl: m.groups.url };
  });
  const jobId = R.JOB_ID.read(env);
  if (!jobId) throw new Error('ROBUSTRL_JOB_ID is required with the router: the job the engines serve');
  const port = R.ROUTER_PORT.read(env);
  const throughputSeconds = R.THROUGHPUT.read(env);
  const maxStaleness = R.MAX_STALENESS.read(env);
  const continuationPolicy = R.CONTINUATION_POLICY.read(env);
  // ROBUSTRL_HTTP_HOST is every service's own address (service-kit's service-config.ts).
  const host = R.ROUTER_HOST.read(env) || env.ROBUSTRL_HTTP_HOST?.trim() || '127.0.0.1';
  const engineKind = R.ENGINE_KIND.read(env);
  const evidenceSeconds = R.EVIDENCE.read(env);
  const requestManagerToken = R.REQUEST_MANAGER_TOKEN.read(env);
  const externalRouterUrl = R.EXTERNAL_ROUTER_URL.read(env);
  const externalRouterApiKey = R.EXTERNAL_ROUTER_API_KEY.read(env);
  return {
    jobId,
    port,
    host,
    auth: httpAuthFromEnv(env, host, 'ROBUSTRL_ROUTER'),
    authSettings: env,
    ...(requestManagerToken ? { requestManagerToken } : {}),
    engines,
    maxStaleness,
    continuationPolicy,
    requestManagerUrl: R.REQUEST_MANAGER_URL.read(env) ?? null,
    trajectoryDatabaseUrl: trajectoryDatabaseUrlFromEnv(env),
    ...(replica ? { replica: { replicaId: R.ROUTER_REPLICA_ID.read(env) || hostname() } } : {}),
    throughputSeconds,
    evidenceSeconds,
    engineKind,
    ...(externalRouterUrl ? { externalRouter: { url: externalRouterUrl, ...(externalRouterApiKey ? { apiKey: externalRouterApiKey } : {}) } } : {}),
  };
}
