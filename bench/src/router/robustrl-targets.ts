import { get } from 'node:http';
import { resolve } from 'node:path';
import { IDENTITY_HEADERS } from '@robustrl/rollout-manager';
import { BenchChild } from './bench-child';
import { kafkaBrokerPids, postgresProcessesOf } from './proc-cpu';
import { waitServing } from './serving-check';
import type { RunningTarget, Target, TargetContext } from './target-types';

const REPO_ROOT = resolve(__dirname, '..', '..', '..');
const START_TIMEOUT_MS = 120_000;

interface RobustrlOptions {
  name: string;
  label: string;
  /** off: no recorder; http: through a request manager process; store: the router writes the trajectory store itself (extraEnv). */
  recording: 'off' | 'http' | 'store';
  extraEnv?: (ctx: TargetContext) => Record<string, string>;
  /**
   * Router replicas (ROBUSTRL_ROUTER_REPLICA=on) the load is spread over, each its own process following
   * the engines the rollout manager announces; 0 (default): the rollout manager's own router serves.
   */
  replicas?: number;
}

function mainOf(service: 'rollout-manager' | 'request-manager'): string {
  return resolve(REPO_ROOT, 'services', service, 'dist', 'main.js');
}

/** What every service of the run gets, as a deployment gives it: the broker, the database, the run's topics. */
function commonEnv(ctx: TargetContext): Record<string, string | undefined> {
  return {
    KAFKA_BROKERS: ctx.kafkaBrokers,
    DATABASE_URL: ctx.databaseUrl,
    ROBUSTRL_TOPIC_PREFIX: ctx.topicPrefix,
    OTEL_SDK_DISABLED: 'true',
    ROBUSTRL_ORCHESTRATOR: 'none',
  };
}

/** GET /readyz until 200 (the request manager is ready once its store and bus are). */
async function waitReady(port: number, child: BenchChild, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!child.running) throw new Error(`${child.name} exited (${child.exitDescription()})\n${child.tail()}`);
    const status = await new Promise<number>((done) => {
      const req = get({ host: '127.0.0.1', port, path: '/readyz', timeout: 2_000, agent: false }, (res) => {
        res.resume();
        done(res.statusCode ?? 0);
      });
      req.on('timeout', () => req.destroy());
      req.on('error', () => done(0));
    });
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${child.name} not ready after ${timeoutMs} ms\n${child.tail()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const pidOf = (child: BenchChild) => () => (child.pid !== undefined && child.running ? [child.pid] : []);

async function startRobustrl(options: RobustrlOptions, ctx: TargetContext): Promise<RunningTarget> {
  const started: BenchChild[] = [];
  const stop = async () => {
    // The router first: it is the request manager's client.
    for (const child of [...started].reverse()) await child.stop(10_000);
  };
  try {
    let requestManagerUrl: string | undefined;
    const launch: string[] = [];
    if (options.recording === 'http') {
      const port = await ctx.freePort();
      const env = { ...commonEnv(ctx), ROBUSTRL_HTTP_PORT: String(port) };
      const rm = new BenchChild('request-manager', process.execPath, [mainOf('request-manager')], env);
      started.push(rm);
      await waitReady(port, rm, START_TIMEOUT_MS);
      requestManagerUrl = `http://127.0.0.1:${port}`;
      launch.push(`ROBUSTRL_HTTP_PORT=${port} node services/request-manager/dist/main.js`);
    }
    const routerPort = await ctx.freePort();
    const extra = options.extraEnv?.(ctx) ?? {};
    const engines = ctx.engineUrls.map((u, i) => `e${i}=${u}`).join(',');
    const routerEnv: Record<string, string | undefined> = {
      ...commonEnv(ctx),
      // Its own HTTP API is not what is measured; the router listens on its own port.
      ROBUSTRL_HTTP_PORT: 'off',
      ROBUSTRL_ROUTER_ENGINES: engines,
      ROBUSTRL_ROUTER_PORT: String(routerPort),
      ROBUSTRL_ROUTER_HOST: '127.0.0.1',
      ROBUSTRL_JOB_ID: ctx.jobId,
      ROBUSTRL_ROUTER_ENGINE_KIND: 'vllm',
      // Unset, not inherited from the shell: recording is what the target says.
      ROBUSTRL_REQUEST_MANAGER_URL: requestManagerUrl,
      ...extra,
    };
    // BENCH_SERVICE_NODE_ARGS: extra Node options for the router, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it.
    const nodeArgs = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const router = new BenchChild('rollout-manager', process.execPath, [...nodeArgs, mainOf('rollout-manager')], routerEnv);
    started.push(router);
    const shown = Object.entries(routerEnv)
      .filter(([k, v]) => v !== undefined && (/^ROBUSTRL_(ROUTER|REQUEST_MANAGER_URL|JOB_ID)/.test(k) || k in extra))
      .map(([k, v]) => `${k}=${v}`);
    launch.push(`${shown.join(' ')} node services/rollout-manager/dist/main.js`);
    const url = `http://127.0.0.1:${routerPort}`;
    // Ready means recording too: a recorded request goes through first (the run's topics are made by the
    // first events, which would otherwise take the warm-up's first seconds).
    let attempt = 0;
    const identity = () => ({
      [IDENTITY_HEADERS.job]: ctx.jobId,
      [IDENTITY_HEADERS.prompt]: `ready-${options.name}-${Date.now()}-${++attempt}`,
      [IDENTITY_HEADERS.sample]: '0',
    });
    await waitServing(url, started, START_TIMEOUT_MS, identity);
    const replicas: BenchChild[] = [];
    const urls: string[] = [];
    for (let i = 0; i < (options.replicas ?? 0); i++) {
      const port = await ctx.freePort();
      const env = {
        ...routerEnv,
        ROBUSTRL_ROUTER_ENGINES: undefined,
        ROBUSTRL_ROUTER_REPLICA: 'on',
        ROBUSTRL_ROUTER_REPLICA_ID: `${ctx.topicPrefix}r${i}`,
        ROBUSTRL_ROUTER_PORT: String(port),
      };
      const replica = new BenchChild(`router replica ${i}`, process.execPath, [...nodeArgs, mainOf('rollout-manager')], env);
      started.push(replica);
      replicas.push(replica);
      urls.push(`http://127.0.0.1:${port}`);
      launch.push(`ROBUSTRL_ROUTER_REPLICA=on ROBUSTRL_ROUTER_PORT=${port} … node services/rollout-manager/dist/main.js`);
    }
    // A replica serves once the rollout manager's announcement gave it the engines.
    for (const u of urls) await waitServing(u, started, START_TIMEOUT_MS, identity);
    const routers = [router, ...replicas];
    const processes: RunningTarget['processes'] = [{ role: 'router', pids: () => routers.flatMap((r) => pidOf(r)()) }];
    if (options.recording === 'http') processes.push({ role: 'request manager', pids: pidOf(started[0]) });
    // Every robustrl service keeps its events in PostgreSQL and on Kafka, recording or not.
    processes.push({ role: 'PostgreSQL', pids: () => postgresProcessesOf(ctx.databaseName) });
    processes.push({ role: 'Kafka broker', pids: kafkaBrokerPids });
    return { urls: urls.length > 0 ? urls : [url], processes, launch, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** robustrl's router: the rollout manager service with its router on, routing to the listed engines. */
export function robustrlRouter(options: RobustrlOptions): Target {
  return { name: options.name, label: options.label, start: (ctx) => startRobustrl(options, ctx) };
}
