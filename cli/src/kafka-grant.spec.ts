import { aclLine, grantOf, KafkaGrantUsageError, standardGrants } from './kafka-grant';

describe('robustrl kafka grant', () => {
  it("gives a login its role's ACLs, an agent's bound to its machine (default: the login's name)", () => {
    const detector = grantOf('detector', { role: 'detector', topicPrefix: 'prod.' });
    expect(detector.principal).toBe('User:detector');
    expect(detector.acls.map((a) => aclLine(detector.principal, a))).toContain('User:detector ALLOW WRITE topic prod.robustrl.verdicts');
    expect(
      grantOf('gpu-7', { role: 'agent' })
        .acls.filter((a) => a.resource === 'group')
        .map((a) => a.name),
    ).toEqual(['robustrl-agent-gpu-7', 'robustrl-agent-gpu-7-weights-', 'robustrl-agent-gpu-7-roster-']);
    const named = grantOf('agent-gpu-7', { role: 'agent', machine: 'gpu-7' });
    expect(named.acls.map((a) => aclLine(named.principal, a))).toContain('User:agent-gpu-7 ALLOW READ group robustrl-agent-gpu-7-weights-*');
  });

  it('refuses an unknown role, a machine for a service and a name Kafka would misread, as usage errors', () => {
    expect(() => grantOf('x', { role: 'service' })).toThrow(
      new KafkaGrantUsageError("--role must be one of detector, controller, request-manager, rollout-manager, weight-registry, agent, operator, got 'service'"),
    );
    expect(() => grantOf('x', { role: 'detector', machine: 'm' })).toThrow(/--machine is for an agent/);
    expect(() => grantOf('a,b', { role: 'operator' })).toThrow(KafkaGrantUsageError);
  });

  it("grant-all: each service's login by its name, the operator's, each agent's, after the login prefix", () => {
    const grants = standardGrants(['gpu-1'], { loginPrefix: 'rl-', topicPrefix: 'prod.' });
    expect(grants.map((g) => `${g.principal}=${g.role}`)).toEqual([
      'User:rl-detector=detector',
      'User:rl-controller=controller',
      'User:rl-request-manager=request-manager',
      'User:rl-rollout-manager=rollout-manager',
      'User:rl-weight-registry=weight-registry',
      'User:rl-operator=operator',
      'User:rl-agent-gpu-1=agent',
    ]);
    expect(grants[6].acls.filter((a) => a.resource === 'group').map((a) => a.name)).toEqual([
      'prod.robustrl-agent-gpu-1',
      'prod.robustrl-agent-gpu-1-weights-',
      'prod.robustrl-agent-gpu-1-roster-',
    ]);
  });
});
