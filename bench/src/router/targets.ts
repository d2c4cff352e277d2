import { resolve } from 'node:path';
import { BenchChild } from './bench-child';
import { sglangGateway, smg } from './gateway-targets';
import { oneProcessRouter } from './serving-check';
import { robustrlRouter } from './robustrl-targets';
import { STORE_RECORDING_ENV, type Target } from './target-types';

export { ProcessRole, RunningTarget, STORE_RECORDING_ENV, Target, TargetContext } from './target-types';

const direct: Target = {
  name: 'direct',
  label: 'direct to the engines',
  start: async (ctx) => ({
    urls: ctx.engineUrls,
    processes: [],
    launch: ['(the load generator spreads requests over the engines, round robin)'],
    stop: async () => undefined,
  }),
};

/** node-passthrough.ts: Node's HTTP stack and nothing else, the floor of a router written on it. */
const nodePassthrough: Target = {
  name: 'node-passthrough',
  label: 'Node.js pass-through proxy (no parsing, round robin)',
  start: async (ctx) => {
    const port = await ctx.freePort();
    const args = [resolve(__dirname, 'node-passthrough.js'), '--engines', ctx.engineUrls.join(','), '--port', String(port)];
    const child = new BenchChild('node-passthrough', process.execPath, args);
    return oneProcessRouter(child, `http://127.0.0.1:${port}`, [`node ${args.join(' ')}`], 30_000);
  },
};

/** Every target, in the order they run and are tabled; `--targets` picks a subset. Add one here. */
export const TARGETS: readonly Target[] = [
  direct,
  sglangGateway({ name: 'sglang-gateway', label: 'SGLang Model Gateway (TCP_NODELAY shim)', shim: true }),
  sglangGateway({ name: 'sglang-gateway-plain', label: 'SGLang Model Gateway, as shipped', shim: false }),
  smg({ name: 'smg', label: 'Shepherd Model Gateway (smg)', policyFor: { 'multi-turn': 'cache_aware' } }),
  nodePassthrough,
  robustrlRouter({ name: 'robustrl-off', label: 'robustrl router, recording off', recording: 'off' }),
  robustrlRouter({ name: 'robustrl-on-http', label: 'robustrl router, recording via request manager (HTTP)', recording: 'http' }),
  robustrlRouter({ name: 'robustrl-on', label: 'robustrl router, recording on (into the store)', recording: 'store', extraEnv: STORE_RECORDING_ENV }),
  // Scaled out: two router replicas (docs/router.md "Scaling out") the load generator spreads requests over, as a balancer would.
  robustrlRouter({ name: 'robustrl-off-x2', label: 'robustrl, 2 router replicas, recording off', recording: 'off', replicas: 2 }),
  robustrlRouter({
    name: 'robustrl-on-x2',
    label: 'robustrl, 2 router replicas, recording on',
    recording: 'store',
    extraEnv: STORE_RECORDING_ENV,
    replicas: 2,
  }),
];

/** The baselines the ratios are taken against. */
export const RATIO_BASES = ['robustrl-off', 'sglang-gateway'] as const;
