import { BenchChild } from './bench-child';
import { oneProcessRouter } from './serving-check';
import type { RunningTarget, Target, TargetContext } from './target-types';
import type { Workload } from './workloads';

/**
 * A gateway's router-only launcher, run as `python -m <module>`: both wheels ship the Rust router as a
 * Python extension, started in the Python process.
 */
const SGLANG_ROUTER = 'sglang_router.launch_router';
/** Not the `smg` console script: sglang-router 0.3.2 installs one of that name too, which wins or loses by install order. */
const SMG = 'smg.launch_router';

const START_TIMEOUT_MS = 90_000;

interface GatewayOptions {
  name: string;
  label: string;
  /** Run it with the TCP_NODELAY shim (LD_PRELOAD). */
  shim?: boolean;
  /** `--policy` for a workload; none: the gateway's default (cache_aware in both wheels measured). */
  policyFor?: Partial<Record<Workload, string>>;
}

async function startGateway(module: string, options: GatewayOptions, ctx: TargetContext, workload: Workload): Promise<RunningTarget> {
  if ('missing' in ctx.baselines) throw new Error(ctx.baselines.missing);
  const [port, prometheusPort] = [await ctx.freePort(), await ctx.freePort()];
  const policy = options.policyFor?.[workload];
  const args = [
    '-m',
    module,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--worker-urls',
    ...ctx.engineUrls,
    ...(policy ? ['--policy', policy] : []),
    // Its metrics listener defaults to 0.0.0.0:29000, which another process may hold.
    '--prometheus-host',
    '127.0.0.1',
    '--prometheus-port',
    String(prometheusPort),
    // The workers are up already: check them at once, not after the default 30 s.
    '--worker-startup-check-interval',
    '1',
    '--log-level',
    'warn',
  ];
  const env = options.shim ? { LD_PRELOAD: ctx.baselines.shim } : {};
  const child = new BenchChild(options.name, ctx.baselines.python, args, env);
  const launch = [`${options.shim ? `LD_PRELOAD=${ctx.baselines.shim} ` : ''}${ctx.baselines.python} ${args.join(' ')}`];
  return oneProcessRouter(child, `http://127.0.0.1:${port}`, launch, START_TIMEOUT_MS);
}

/** The SGLang Model Gateway (PyPI's sglang-router): the router SGLang deployments put in front of engines. */
export function sglangGateway(options: GatewayOptions): Target {
  return { name: options.name, label: options.label, start: (ctx, workload) => startGateway(SGLANG_ROUTER, options, ctx, workload) };
}

/** The Shepherd Model Gateway (PyPI's smg), the SGLang Model Gateway's successor. */
export function smg(options: GatewayOptions): Target {
  return { name: options.name, label: options.label, start: (ctx, workload) => startGateway(SMG, options, ctx, workload) };
}
