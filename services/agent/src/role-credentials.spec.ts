import { createMessage } from '@robustrl/contracts';
import { busIdentityFromEnv, ControlPlaneVerifier, kafkaSecurityFromEnv, machineKeyFromEnv, machineKeyOf, machineKeyText, MachineSigner } from '@robustrl/bus';
import { checkBearer, httpAuthFromEnv, MIN_TOKEN_LENGTH } from '@robustrl/service-kit';
import { agentApiEnv, agentConfigFromEnv } from './agent-config';
import { AGENT_CREDENTIALS } from './role-credentials';
import { RoleProcess } from './role-process';

const SECRET = 'the-control-planes-identity-secret-0123456789';

/**
 * Least privilege for the framework process (docs/operators/security.md): an agent holding its machine key and
 * broker login starts a role process; what the framework code finds in its environment cannot speak for
 * the machine on the bus.
 */
describe("the role process's environment", () => {
  const agentEnv: Record<string, string> = {
    ROBUSTRL_MACHINE_KEY: machineKeyText(machineKeyOf(SECRET, 'm-0')),
    ROBUSTRL_CONTROLLER_PUBLIC_KEY: 'the-public-key-is-public',
    KAFKA_BROKERS: '10.0.0.1:9093',
    KAFKA_SSL: 'true',
    KAFKA_SASL_MECHANISM: 'scram-sha-512',
    KAFKA_SASL_USERNAME: 'agent-m-0',
    KAFKA_SASL_PASSWORD: 'broker-password-0123456789',
    DATABASE_URL: 'postgres://robustrl:db-password@10.0.0.2/robustrl',
    ROBUSTRL_HTTP_TOKENS: 'agent-api-token-0123456789',
    ROBUSTRL_REQUEST_MANAGER_TOKEN: 'store-token-0123456789',
    ROBUSTRL_MACHINE_KEY_FILE_SPEC_PATH: '/not/a/credential',
  };
  let seen: Record<string, string>;

  beforeAll(async () => {
    const lines: string[] = [];
    let exited = false;
    const role = new RoleProcess({ stopGraceMs: 300, onExit: () => (exited = true), onOutput: (l) => lines.push(l), withheldEnv: AGENT_CREDENTIALS });
    const before = { ...process.env };
    Object.assign(process.env, agentEnv, { ROBUSTRL_HTTP_TOKENS_FILE: '/run/secrets/agent-tokens' });
    try {
      await role.start('env', { ROBUSTRL_AGENT_TOKEN: 'the-frameworks-own-token-0123' });
      for (let i = 0; i < 200 && !exited; i++) await new Promise((r) => setTimeout(r, 20));
    } finally {
      for (const name of Object.keys(process.env)) if (!(name in before)) delete process.env[name];
      Object.assign(process.env, before);
    }
    seen = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  });

  it('holds none of the credentials the agent holds, in either form, and the token it was given', () => {
    for (const name of AGENT_CREDENTIALS) expect(seen[name]).toBeUndefined();
    const secrets = AGENT_CREDENTIALS.map((name) => agentEnv[name]).filter(Boolean);
    expect(Object.values(seen).filter((v) => secrets.some((secret) => v.includes(secret)))).toEqual([]);
    expect(seen.ROBUSTRL_AGENT_TOKEN).toBe('the-frameworks-own-token-0123');
    expect(seen.ROBUSTRL_MACHINE_KEY_FILE_SPEC_PATH).toBe('/not/a/credential'); // what is not a credential passes
  });

  it('gives no key to sign as the machine, nor a broker login', () => {
    expect(machineKeyFromEnv(seen)).toBeUndefined();
    // The agent's own configuration code, run on what the framework has: no signer, no login.
    expect(() => busIdentityFromEnv(seen, { machineId: 'm-0' })).toThrow(/ROBUSTRL_MACHINE_KEY and ROBUSTRL_CONTROLLER_PUBLIC_KEY go together/);
    expect(() => kafkaSecurityFromEnv(seen)).toThrow(/needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD/);
  });

  it('a record the framework signs as the machine with what it has is refused by the control plane', () => {
    const message = createMessage(
      'RolePhaseChanged',
      { machineId: 'm-0', role: 'trainer', phase: 'training', step: 3, changedAt: new Date().toISOString() },
      { jobId: 'job-1', source: 'agent/m-0', occurredAt: new Date().toISOString() },
    );
    const record = { topic: 'robustrl.training', key: 'job-1', value: Buffer.from(JSON.stringify(message)) };
    const verifier = new ControlPlaneVerifier(SECRET);
    // Its best guess at a key: the only secrets it holds.
    for (const guess of [seen.ROBUSTRL_AGENT_TOKEN, seen.ROBUSTRL_CONTROLLER_PUBLIC_KEY]) {
      const headers = new MachineSigner('m-0', Buffer.from(guess)).sign(record);
      expect(verifier.verify({ ...record, headers }, message)).toBe('the signature does not hold for machine:m-0');
    }
    // The agent, with its key, is accepted: the check is not refusing everything.
    const agent = new MachineSigner('m-0', machineKeyOf(SECRET, 'm-0')).sign(record);
    expect(verifier.verify({ ...record, headers: agent }, message)).toBeNull();
  });
});

describe("the role process's token for its agent's API", () => {
  const base = { ROBUSTRL_JOB_ID: 'job-1', ROBUSTRL_MACHINE_ID: 'm-0', ROBUSTRL_ROLE: 'rollout' };
  const operatorToken = 'the-operators-pool-wide-token-0123';

  it('is minted by its agent, valid there and nowhere else, and is none of the tokens the operator provisioned', () => {
    const env = { ...base, ROBUSTRL_HTTP_TOKENS: operatorToken, ROBUSTRL_HTTP_READ_TOKENS: 'a-dashboards-read-token-0123' };
    const agent = agentConfigFromEnv(env);
    const neighbour = agentConfigFromEnv({ ...env, ROBUSTRL_MACHINE_ID: 'm-1' });
    expect(agent.apiToken).toBeDefined();
    expect(agent.apiToken!.length).toBeGreaterThanOrEqual(MIN_TOKEN_LENGTH);
    expect([operatorToken, neighbour.apiToken]).not.toContain(agent.apiToken);
    const here = httpAuthFromEnv(agentApiEnv(env, agent.apiToken), '127.0.0.1');
    const there = httpAuthFromEnv(agentApiEnv(env, neighbour.apiToken), '127.0.0.1');
    expect(checkBearer(here, `Bearer ${agent.apiToken}`)).toEqual({ ok: true, scope: 'caller' });
    expect(checkBearer(here, `Bearer ${operatorToken}`)).toEqual({ ok: true, scope: 'caller' });
    expect(checkBearer(there, `Bearer ${agent.apiToken}`)).toMatchObject({ ok: false, status: 401 });
  });

  it('is none where the API takes no token (loopback, open), and is minted where only a token file is given', () => {
    expect(agentConfigFromEnv(base).apiToken).toBeUndefined();
    expect(agentApiEnv(base, undefined)).toBe(base);
    expect(agentConfigFromEnv({ ...base, ROBUSTRL_HTTP_ADMIN_TOKENS_FILE: '/run/secrets/admin' }).apiToken).toBeDefined();
  });
});
