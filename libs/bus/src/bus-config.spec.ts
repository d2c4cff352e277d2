import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { busConfigFromEnv } from './bus-config';
import { aclsFor, TOPIC_RIGHTS } from './kafka/topic-acls';

describe('bus configuration from the environment', () => {
  const kafka = { KAFKA_BROKERS: '127.0.0.1:19092' };

  it('removes dead members of this host before joining unless ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS=off', () => {
    expect(busConfigFromEnv(kafka, 'robustrl-detector')).toMatchObject({ adapter: 'kafka', evictDeadMembers: true });
    expect(busConfigFromEnv({ ...kafka, ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS: 'on' }, 'robustrl-detector')).toMatchObject({ evictDeadMembers: true });
    expect(busConfigFromEnv({ ...kafka, ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS: 'off' }, 'robustrl-detector')).toMatchObject({ evictDeadMembers: false });
  });

  it('stops start-up on another value, naming the variable', () => {
    expect(() => busConfigFromEnv({ ...kafka, ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS: 'yes' }, 'robustrl-detector')).toThrow(/ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS/);
  });

  it('reads TLS and a SCRAM login, the password inline or from a file, and never sends a login without TLS', () => {
    const dir = mkdtempSync(join(tmpdir(), 'robustrl-bus-config-'));
    writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n');
    writeFileSync(join(dir, 'password'), 'from-a-file\n');
    const secured = { ...kafka, KAFKA_SSL_CA_FILE: join(dir, 'ca.pem'), KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512', KAFKA_SASL_USERNAME: 'detector' };
    expect(busConfigFromEnv({ ...secured, KAFKA_SASL_PASSWORD_FILE: join(dir, 'password') }, 'c')).toMatchObject({
      ssl: { ca: expect.stringContaining('BEGIN CERTIFICATE') },
      sasl: { mechanism: 'scram-sha-512', username: 'detector', password: 'from-a-file' },
    });
    expect(busConfigFromEnv({ ...kafka, KAFKA_SSL: 'true' }, 'c')).toMatchObject({ ssl: {} });
    expect(busConfigFromEnv(kafka, 'c')).not.toHaveProperty('sasl');
    expect(() => busConfigFromEnv({ ...secured, KAFKA_SSL_CA_FILE: '', KAFKA_SASL_PASSWORD: 'p' }, 'c')).toThrow(/needs TLS to the brokers/);
    expect(() => busConfigFromEnv(secured, 'c')).toThrow(/needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD/);
    expect(() => busConfigFromEnv({ ...secured, KAFKA_SASL_PASSWORD_FILE: join(dir, 'missing') }, 'c')).toThrow(/KAFKA_SASL_PASSWORD_FILE: cannot read/);
    expect(() => busConfigFromEnv({ ...secured, KAFKA_SASL_MECHANISM: 'gssapi', KAFKA_SASL_PASSWORD: 'p' }, 'c')).toThrow(/invalid bus configuration/);
    expect(() => busConfigFromEnv({ ...kafka, KAFKA_SASL_USERNAME: 'x' }, 'c')).toThrow(/without KAFKA_SASL_MECHANISM/);
    expect(() => busConfigFromEnv({ ...kafka, KAFKA_SSL: 'yes' }, 'c')).toThrow(/KAFKA_SSL must be true or false/);
  });

  it('takes the password file over the password when both are set, and KAFKA_SSL in any case', () => {
    const dir = mkdtempSync(join(tmpdir(), 'robustrl-bus-config-'));
    writeFileSync(join(dir, 'password'), 'from-a-file\n');
    const login = { KAFKA_SSL: 'TRUE', KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'detector' };
    expect(busConfigFromEnv({ ...kafka, ...login, KAFKA_SASL_PASSWORD: 'inline', KAFKA_SASL_PASSWORD_FILE: join(dir, 'password') }, 'c')).toMatchObject({
      ssl: {},
      sasl: { mechanism: 'plain', username: 'detector', password: 'from-a-file' },
    });
    expect(busConfigFromEnv({ KAFKA_BROKERS: ' , ' }, 'c')).toEqual({ adapter: 'in-process' });
  });
});

describe('topic ACLs by role', () => {
  it("agents write their reports and answers, read what addresses machines, never write a command, a verdict or a trajectory, and join only their machine's groups", () => {
    const agent = aclsFor('agent', { topicPrefix: 'prod.', machineId: 'gpu-7' });
    const writes = agent.filter((a) => a.operation === 'write').map((a) => a.name);
    for (const forbidden of ['prod.robustrl.control', 'prod.robustrl.verdicts', 'prod.robustrl.trajectories']) expect(writes).not.toContain(forbidden);
    expect(writes).toEqual(
      expect.arrayContaining(['prod.robustrl.telemetry', 'prod.robustrl.heartbeat', 'prod.robustrl.replies', 'prod.robustrl.dead-letter']),
    );
    expect(agent.filter((a) => a.operation === 'read' && a.resource === 'topic').map((a) => a.name)).toEqual([
      'prod.robustrl.control',
      'prod.robustrl.heartbeat',
      'prod.robustrl.weights',
      'prod.robustrl.membership',
    ]);
    expect(agent.filter((a) => a.resource === 'group')).toEqual([
      { resource: 'group', pattern: 'literal', name: 'prod.robustrl-agent-gpu-7', operation: 'read' },
      { resource: 'group', pattern: 'prefixed', name: 'prod.robustrl-agent-gpu-7-weights-', operation: 'read' },
      { resource: 'group', pattern: 'prefixed', name: 'prod.robustrl-agent-gpu-7-roster-', operation: 'read' },
    ]);
    expect(agent.some((a) => a.operation === 'create')).toBe(false);
    expect(() => aclsFor('agent')).toThrow(/name its machine/);
  });

  it('a service writes its own outputs only, joins its own groups and may create the topics', () => {
    const detector = aclsFor('detector');
    expect(detector.filter((a) => a.operation === 'write').map((a) => a.name)).toEqual([...TOPIC_RIGHTS.detector.write]);
    expect(detector.filter((a) => a.operation === 'write').map((a) => a.name)).not.toContain('robustrl.control');
    expect(detector).toContainEqual({ resource: 'topic', pattern: 'prefixed', name: 'robustrl.', operation: 'create' });
    expect(detector.filter((a) => a.resource === 'group')).toEqual([{ resource: 'group', pattern: 'prefixed', name: 'robustrl-detector', operation: 'read' }]);
    const requestManager = aclsFor('request-manager', { topicPrefix: 'prod.' });
    expect(requestManager.filter((a) => a.operation === 'write').map((a) => a.name)).toEqual(['prod.robustrl.trajectories', 'prod.robustrl.dead-letter']);
  });

  it("an operator reads everything (dead letters included) and joins robustrl tail's groups", () => {
    const operator = aclsFor('operator', { topicPrefix: 'prod.' });
    expect(operator.filter((a) => a.operation === 'read' && a.resource === 'topic').map((a) => a.name)).toContain('prod.robustrl.dead-letter');
    expect(operator.filter((a) => a.resource === 'group')).toEqual([
      { resource: 'group', pattern: 'prefixed', name: 'prod.robustrl-tail-', operation: 'read' },
    ]);
  });
});
