/**
 * What the agent holds that its role process must not (docs/operators/security.md): whatever lets a process speak
 * for the machine on the bus (its signing key, the broker login), the control plane's secrets should a
 * deployment put them here, the database's address with its password, and the tokens of the agent's API
 * (every scope) and of the request manager. Each also as its `_FILE` form: the path to a mounted secret. The framework
 * gets its own token of the agent's loopback API instead (agent-runtime.ts roleEnv).
 */
export const AGENT_CREDENTIALS: readonly string[] = [
  'ROBUSTRL_MACHINE_KEY',
  'KAFKA_SASL_USERNAME',
  'KAFKA_SASL_PASSWORD',
  'ROBUSTRL_IDENTITY_SECRET',
  'ROBUSTRL_CONTROLLER_COMMAND_SECRET',
  'DATABASE_URL',
  'ROBUSTRL_HTTP_TOKENS',
  'ROBUSTRL_HTTP_ADMIN_TOKENS',
  'ROBUSTRL_HTTP_READ_TOKENS',
  'ROBUSTRL_HTTP_METRICS_TOKENS',
  'ROBUSTRL_REQUEST_MANAGER_TOKEN',
].flatMap((name) => [name, `${name}_FILE`]);
