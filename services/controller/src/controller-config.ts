import { Env, int, oneOf, seconds } from '@robustrl/config';
import { ControllerSettings, DEFAULT_CONTROLLER_SETTINGS } from '@robustrl/controller-domain';

/**
 * What the controller reads from its environment (docs/operators/configuration-reference.md): its recovery
 * settings (paper Figure 7) and how often it reads the platform for announced departures.
 */
const owner = 'controller';
const d = DEFAULT_CONTROLLER_SETTINGS;

export const COMMAND_TIMEOUT = seconds('ROBUSTRL_COMMAND_TIMEOUT_SECONDS', {
  owner,
  meaning: 'a recovery command unanswered this long has failed',
  default: d.commandTimeoutMs / 1000,
});
export const RECOVERY_POLICY = oneOf('ROBUSTRL_RECOVERY_POLICY', ['role-based', 'task-restart'], {
  owner,
  meaning: '`role-based` (paper Fig. 7) or `task-restart` (every fault restarts the whole task, the baseline)',
  default: d.policy,
});
export const ENGINE_RESTART_BUDGET = int('ROBUSTRL_ENGINE_RESTART_BUDGET', {
  owner,
  meaning: 'in-place rollout engine restarts a machine may have within the window before a process fault replaces it (0: always replace)',
  default: d.engineRestartBudget,
  min: 0,
});
export const ENGINE_RESTART_WINDOW = seconds('ROBUSTRL_ENGINE_RESTART_WINDOW_SECONDS', {
  owner,
  meaning: 'the window of `ROBUSTRL_ENGINE_RESTART_BUDGET`',
  default: d.engineRestartWindowMs / 1000,
});
export const MACHINE_RESTART_BUDGET = int('ROBUSTRL_MACHINE_RESTART_BUDGET', {
  owner,
  meaning:
    'restarts of a trainer machine for its own faults (in place or by a task restart) within the window before its next fault retires it (0: never retire)',
  default: d.machineRestartBudget,
  min: 0,
});
export const MACHINE_RESTART_WINDOW = seconds('ROBUSTRL_MACHINE_RESTART_WINDOW_SECONDS', {
  owner,
  meaning: 'the window of `ROBUSTRL_MACHINE_RESTART_BUDGET`',
  default: d.machineRestartWindowMs / 1000,
});
export const DEPARTURE_POLL = seconds('ROBUSTRL_DEPARTURE_POLL_SECONDS', {
  owner,
  meaning:
    "how often the orchestrator's platform is read for the departures it announces (Kubernetes: evictions, preemptions, deletions, removal taints), each sent as a `node-draining` notice",
  default: 2,
  zero: 'not read',
});

/** The recovery settings; a bad value stops start-up naming the variable and the form. */
export function controllerSettingsFromEnv(env: Env = process.env): ControllerSettings {
  return {
    commandTimeoutMs: Math.round(COMMAND_TIMEOUT.read(env) * 1000),
    policy: RECOVERY_POLICY.read(env),
    engineRestartBudget: ENGINE_RESTART_BUDGET.read(env),
    engineRestartWindowMs: Math.round(ENGINE_RESTART_WINDOW.read(env) * 1000),
    machineRestartBudget: MACHINE_RESTART_BUDGET.read(env),
    machineRestartWindowMs: Math.round(MACHINE_RESTART_WINDOW.read(env) * 1000),
  };
}

/** How often departures are read, in milliseconds (0: never). */
export const departurePollMs = (env: Env = process.env): number => Math.round(DEPARTURE_POLL.read(env) * 1000);
