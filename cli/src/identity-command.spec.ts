import {
  ControlPlaneVerifier,
  controllerKeyPairOf,
  controlPlaneRecordKeyPairOf,
  machineKeyFromText,
  MachineSigner,
  publicKeyFromText,
  publicKeyText,
  roleCertificateHolds,
} from '@robustrl/bus';
import { createMessage, encodeMessage, topicOf } from '@robustrl/contracts';
import { identityKeyOf, IdentityUsageError } from './identity-command';

describe('robustrl identity', () => {
  const secret = 'cli-identity-secret-0123456789abcdefgh';

  it("prints a machine key the control plane takes from that machine only, and the controller's public key", () => {
    const key = identityKeyOf('machine-key', secret, 'rollout-17');
    const signer = new MachineSigner('rollout-17', machineKeyFromText(key));
    const sample = (machineId: string) =>
      createMessage(
        'GpuActivitySampled',
        { machineId, sampledAt: '2026-11-24T00:00:00.000Z', intervalSeconds: 10, tensorActive: 0.5, source: 'emulated' },
        { jobId: 'j', source: `agent/${machineId}`, occurredAt: '2026-11-24T00:00:00.000Z' },
      );
    const record = (m: ReturnType<typeof sample>, as: MachineSigner) => {
      const value = encodeMessage(m);
      return { topic: topicOf(m.type), key: 'j', value, headers: as.sign({ topic: topicOf(m.type), key: 'j', value }) };
    };
    const verifier = new ControlPlaneVerifier(secret);
    expect(verifier.verify(record(sample('rollout-17'), signer), sample('rollout-17'))).toBeNull();
    expect(verifier.verify(record(sample('rollout-18'), new MachineSigner('rollout-18', machineKeyFromText(key))), sample('rollout-18'))).toMatch(
      /does not hold/,
    );
    expect(identityKeyOf('machine-key', secret, 'rollout-18')).not.toBe(key);

    const printed = identityKeyOf('controller-public-key', secret);
    expect(publicKeyText(publicKeyFromText(printed))).toBe(publicKeyText(controllerKeyPairOf(secret).publicKey));
    // With the controller's own command secret, its key: the identity secret no longer issues commands.
    const commandSecret = 'the-controllers-own-command-secret-0123456789';
    expect(identityKeyOf('controller-public-key', secret, undefined, commandSecret)).toBe(publicKeyText(controllerKeyPairOf(commandSecret).publicKey));
    expect(identityKeyOf('controller-public-key', undefined, undefined, commandSecret)).not.toBe(printed);
    expect(() => identityKeyOf('controller-public-key', secret, undefined, 'short')).toThrow(IdentityUsageError);

    // The control plane's record key: from the identity secret alone, another key than the controller's.
    const controlPlane = identityKeyOf('control-plane-public-key', secret, undefined, commandSecret);
    expect(controlPlane).toBe(publicKeyText(controlPlaneRecordKeyPairOf(secret).publicKey));
    expect(controlPlane).not.toBe(printed);
  });

  it("prints a machine's role certificate that holds for that machine and role only", () => {
    const certificate = identityKeyOf('role-certificate', secret, 'trainer-0', undefined, 'trainer');
    const key = controlPlaneRecordKeyPairOf(secret).publicKey;
    expect(roleCertificateHolds(key, 'trainer-0', 'trainer', certificate)).toBe(true);
    expect(roleCertificateHolds(key, 'rollout-3', 'trainer', certificate)).toBe(false);
    expect(roleCertificateHolds(key, 'trainer-0', 'hybrid', certificate)).toBe(false);
    expect(() => identityKeyOf('role-certificate', secret, 'trainer-0', undefined, 'admin')).toThrow(/one of trainer, rollout, hybrid/);
    expect(() => identityKeyOf('role-certificate', secret, undefined, undefined, 'trainer')).toThrow(/role-certificate <machineId> <role>/);
  });

  it('says what is missing', () => {
    expect(() => identityKeyOf('controller-public-key', undefined)).toThrow(IdentityUsageError);
    expect(() => identityKeyOf('controller-public-key', 'short')).toThrow(/at least 32 characters/);
    expect(() => identityKeyOf('machine-key', secret)).toThrow(/name the machine/);
  });
});
