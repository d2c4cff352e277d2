import { custom, int, oneOf, seconds, text } from '@robustrl/config';
import { ContinuationPolicy } from '@robustrl/contracts';
import { ENGINE_KINDS } from './router/engines/engine-adapter';

/**
 * What the rollout manager's router reads from its environment (docs/operators/configuration-reference.md),
 * read by routerConfigFromEnv; its API keys (`ROBUSTRL_ROUTER_TOKENS`, `_FILE`, `_AUTH`) are read as every
 * service's HTTP tokens are (service-kit's http-auth.ts).
 */
const owner = 'router';

/** `on` or `off`, in any case (as the router has always read them). */
const onOrOff = (name: string, meaning: string, defaultText: string) =>
  custom(name, {
    owner,
    meaning,
    default: undefined,
    defaultText,
    accepted: 'on or off',
    parse: (raw) => (/^on$/i.test(raw) ? true : /^off$/i.test(raw) ? false : undefined),
  });

export const ROUTER = onOrOff('ROBUSTRL_ROUTER', 'run the router (`on`) in the rollout manager', 'off, unless `ROBUSTRL_ROUTER_ENGINES` lists engines');
export const ROUTER_REPLICA = onOrOff(
  'ROBUSTRL_ROUTER_REPLICA',
  'run the rollout manager as a router replica (`on`): it routes and records, its engines are the ones the rollout manager announces (`RouterEnginesAnnounced`), it runs no pool consumer and no scaler',
  'off',
);
export const ROUTER_REPLICA_ID = text('ROBUSTRL_ROUTER_REPLICA_ID', {
  owner,
  meaning: "a router replica's name (its consumer group is `robustrl-rollout-manager-router-<id>`)",
  default: undefined,
  defaultText: "the host name (a pod's name)",
});
export const ROUTER_ENGINES = text('ROBUSTRL_ROUTER_ENGINES', {
  owner,
  meaning: 'engines to start with (also turns the router on); registered ones join as their machines hold weights',
  default: undefined,
  defaultText: 'none',
  accepted: 'id=url or id@machine=url, comma separated',
});
export const JOB_ID = text('ROBUSTRL_JOB_ID', { owner, meaning: 'the job the engines serve', default: undefined, defaultText: 'required with the router' });
export const ROUTER_PORT = int('ROBUSTRL_ROUTER_PORT', { owner, meaning: "the router's port", default: 8000, min: 0, max: 65535 });
export const ROUTER_HOST = text('ROBUSTRL_ROUTER_HOST', {
  owner,
  meaning:
    "the address the router binds: on a cluster the pod's address, since agent loops run elsewhere (then with `ROBUSTRL_ROUTER_TOKENS`, the loops' API key)",
  default: undefined,
  defaultText: '`ROBUSTRL_HTTP_HOST`, else 127.0.0.1',
});
export const TRAJECTORY_DATABASE_URL = text('ROBUSTRL_TRAJECTORY_DATABASE_URL', {
  owner,
  meaning: 'the trajectory store\'s PostgreSQL, which the router records into itself, one statement for many requests (docs/router.md "Recording")',
  default: undefined,
  // Checked by routerConfigFromEnv, whose error hides the URL's password.
  accepted: 'a postgres:// URL',
});
export const REQUEST_MANAGER_URL = text('ROBUSTRL_REQUEST_MANAGER_URL', {
  owner,
  meaning: "without a trajectory database: the request manager's base URL, recording through its HTTP API (without either the router records nothing)",
  default: undefined,
});
export const REQUEST_MANAGER_TOKEN = text('ROBUSTRL_REQUEST_MANAGER_TOKEN', {
  owner,
  meaning: 'the bearer token the router records with at the request manager, when its API asks for one',
  default: undefined,
});
export const THROUGHPUT = seconds('ROBUSTRL_THROUGHPUT_SECONDS', {
  owner,
  meaning: "how often each live engine's throughput is sampled and published (`RolloutThroughputSampled`)",
  default: 10,
});
export const MAX_STALENESS = int('ROBUSTRL_MAX_STALENESS', {
  owner,
  meaning: 'how many weight versions behind the newest an engine may be and still serve (and kept trajectories stay within); 0 for a synchronous job',
  default: 1,
  min: 0,
});
export const CONTINUATION_POLICY = oneOf('ROBUSTRL_CONTINUATION_POLICY', ContinuationPolicy.options, {
  owner,
  meaning:
    "what a recorded trajectory whose turns are older than its engine's weights does: `keep` them (restarting anyway when they alone are beyond the staleness bound) or `restart-from-prompt` (the caller is answered 409 `TrajectoryRestartedError`)",
  default: 'keep',
});
export const ENGINE_KIND = oneOf('ROBUSTRL_ROUTER_ENGINE_KIND', ENGINE_KINDS, {
  owner,
  meaning:
    "the engines' kind, for every engine listed or registered: how their token ids are read, how a request continues on them, how they are probed and aborted",
  default: 'vllm',
});
export const EVIDENCE = seconds('ROBUSTRL_ROUTER_EVIDENCE_SECONDS', {
  owner,
  meaning: "how often each engine's request stalls and failures go to the detector",
  default: 1,
});
export const EXTERNAL_ROUTER_URL = text('ROBUSTRL_EXTERNAL_ROUTER_URL', {
  owner,
  meaning: 'an SGLang Model Gateway whose workers are kept equal to the engines the router would use (agent loops then call the gateway)',
  default: undefined,
});
export const EXTERNAL_ROUTER_API_KEY = text('ROBUSTRL_EXTERNAL_ROUTER_API_KEY', {
  owner,
  meaning: "the SGLang Model Gateway's API key",
  default: undefined,
});
