import { aclLine, grantOf, KafkaGrantUsageError } from './kafka-grant';

describe('robustrl kafka grant', () => {
  it("gives a login its role's ACLs, an agent's bound to its machine (default: the login's name)", () => {
    const detector = grantOf('detector', { role: 'detector', topicPrefix: 'prod.' });
    expect(detector.principal).toBe('User:detector');
    expect(detector.acls.map((a) => aclLine(detector.principal, a))).toContain('User:detector ALLOW WRITE topic prod.robustrl.verdicts');
    expect(
      grantOf('gpu-7', { role: 'agent' })
        .acls.filter((a) => a.resource === 'group')
        .map((a) => a.name),
    ).toEqual(['robustrl-agent-gpu-7', 'robustrl-agent-gpu-7-weights-']);
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
});
