import { createMessage, DataOf, draft, encodeMessage, RobustrlMessage, topicOf } from '@robustrl/contracts';
import { roleCertificateFromEnv } from './identity-config';
import { controlPlaneRecordKeyPairOf, machineKeyOf, machineKeyText, publicKeyText } from './identity-keys';
import { RecordSigner } from './record-identity';
import { certifyPromotions, roleCertificateOf } from './role-certificates';
import { MachineSigner, ServiceSigner } from './signers';
import { AgentCommandVerifier, ControlPlaneVerifier } from './verifiers';

const SECRET = 'role-certificates-spec-secret-0123456789';
const at = { jobId: 'job-1', occurredAt: '2026-11-27T00:00:00.000Z' };

function signed(message: RobustrlMessage, signer: RecordSigner) {
  const topic = topicOf(message.type);
  const value = encodeMessage(message);
  return { topic, key: message.jobId, value, headers: signer.sign({ topic, key: message.jobId, value }, message) };
}

const registered = (machineId: string, role: 'trainer' | 'rollout' | 'hybrid', roleCertificate?: string) =>
  createMessage(
    'MachineRegistered',
    {
      machineId,
      role,
      zone: 'z',
      hardwareClass: 'h',
      gpus: 1,
      agentAddress: 'http://10.0.0.9:7000',
      hostAddress: '10.0.0.9',
      dpRank: 0,
      ...(roleCertificate ? { roleCertificate } : {}),
    },
    { ...at, source: `agent/${machineId}` },
  );
const lent = (machineId: string, roleCertificate?: string) =>
  createMessage(
    'MachineRoleChanged',
    { machineId, from: 'rollout', to: 'trainer', reason: 'warm standby', ...(roleCertificate ? { roleCertificate } : {}) },
    { ...at, source: `agent/${machineId}` },
  );

describe('role certificates: a machine trains only with the operator’s or the controller’s word for it', () => {
  const controlPlane = new ControlPlaneVerifier(SECRET);
  const agent = new AgentCommandVerifier(controlPlaneRecordKeyPairOf(SECRET).publicKey, controlPlaneRecordKeyPairOf(SECRET).publicKey);
  const machine = (id: string) => new MachineSigner(id, machineKeyOf(SECRET, id));
  const both = (m: RobustrlMessage) => {
    const signer = machine((m.data as { machineId: string }).machineId);
    return [controlPlane.verify(signed(m, signer), m), agent.verify(signed(m, signer), m)];
  };

  it('takes a trainer registering with its own certificate, and a rollout with none', () => {
    expect(both(registered('trainer-0', 'trainer', roleCertificateOf(SECRET, 'trainer-0', 'trainer')))).toEqual([null, null]);
    expect(both(registered('rollout-3', 'rollout'))).toEqual([null, null]);
  });

  it('refuses a rollout machine registering as trainer (or hybrid): without a certificate, with another machine’s, with one for another role', () => {
    expect(both(registered('rollout-3', 'trainer'))).toEqual([
      expect.stringMatching(/claims the trainer role for rollout-3 without a role certificate/),
      expect.stringMatching(/without a role certificate/),
    ]);
    const copied = registered('rollout-3', 'trainer', roleCertificateOf(SECRET, 'trainer-0', 'trainer'));
    expect(both(copied)).toEqual([expect.stringMatching(/does not hold for that machine and role/), expect.stringMatching(/does not hold/)]);
    const rolloutCertificate = roleCertificateOf(SECRET, 'rollout-3', 'rollout');
    expect(both(registered('rollout-3', 'hybrid', rolloutCertificate))[0]).toMatch(
      /claims the hybrid role for rollout-3 with a role certificate that does not hold/,
    );
    // Another deployment's certificate for the same machine and role.
    expect(both(registered('rollout-3', 'trainer', roleCertificateOf(`${SECRET}-other`, 'rollout-3', 'trainer')))[0]).toMatch(/does not hold/);
  });

  it("refuses another machine's registration replayed with its certificate (another host for trainer-0: the rendezvous)", () => {
    const forged = registered('trainer-0', 'trainer', roleCertificateOf(SECRET, 'trainer-0', 'trainer'));
    // Sent by rollout-3 with its own key: the control plane checks the HMAC, an agent the publisher signature.
    expect(controlPlane.verify(signed(forged, machine('rollout-3')), forged)).toMatch(
      /the signature does not hold for machine:rollout-3|speaks for machine 'trainer-0'|sent as/,
    );
    expect(agent.verify(signed(forged, machine('rollout-3')), forged)).toMatch(
      /claims the trainer role for trainer-0 but is not signed under its certified publisher key/,
    );
    expect(agent.verify(signed(forged, machine('trainer-0')), forged)).toBeNull();
  });

  it('refuses a deregistration an agent wrote: only the control plane takes a machine out of the job', () => {
    const gone = (source: string) => createMessage('MachineDeregistered', { machineId: 'trainer-0', reason: 'forged' }, { ...at, source });
    expect(agent.verify(signed(gone('agent/trainer-0'), machine('trainer-0')), gone('agent/trainer-0'))).toMatch(/not published by the control plane/);
    expect(controlPlane.verify(signed(gone('agent/trainer-0'), machine('trainer-0')), gone('agent/trainer-0'))).toMatch(/the control plane's to publish/);
    expect(agent.verify(signed(gone('controller/executor'), new ServiceSigner('controller', SECRET)), gone('controller/executor'))).toBeNull();
  });

  it('refuses a machine promoting itself; takes the promotion the controller certified', () => {
    expect(both(lent('rollout-3'))[0]).toMatch(/MachineRoleChanged claims the trainer role for rollout-3 without a role certificate/);
    const complete = certifyPromotions(SECRET);
    const promotion = complete(
      draft('PromoteRolloutToTrainer', { recoveryId: 'r', commandId: 'r/1', rolloutMachineId: 'rollout-3', replacesMachineId: 'trainer-1' }),
    );
    const certificate = (promotion.data as DataOf<'PromoteRolloutToTrainer'>).roleCertificate!;
    // Deterministic: the promotion decided again is the same message.
    expect(
      (
        complete(draft('PromoteRolloutToTrainer', { recoveryId: 'r', commandId: 'r/1', rolloutMachineId: 'rollout-3', replacesMachineId: 'trainer-1' }))
          .data as DataOf<'PromoteRolloutToTrainer'>
      ).roleCertificate,
    ).toBe(certificate);
    expect(both(lent('rollout-3', certificate))).toEqual([null, null]);
    expect(both(lent('rollout-4', certificate))[0]).toMatch(/does not hold/);
    // Other drafts pass through untouched.
    const other = draft('WeightVersionRetired', { version: 3 });
    expect(complete(other)).toBe(other);
  });

  it('a control-plane service is not asked for one; an agent without the public key takes registrations as before', () => {
    const fromService = createMessage(
      'MachineRoleChanged',
      { machineId: 'rollout-3', from: 'trainer', to: 'rollout', reason: 'returned' },
      { ...at, source: 'controller' },
    );
    expect(controlPlane.verify(signed(fromService, new ServiceSigner('controller', SECRET)), fromService)).toBeNull();
    const legacy = new AgentCommandVerifier(controlPlaneRecordKeyPairOf(SECRET).publicKey);
    const m = registered('rollout-3', 'trainer');
    expect(legacy.verify(signed(m, machine('rollout-3')), m)).toBeNull();
  });

  it('an agent keeps a manifest only from a certified trainer, signed with the key its certificate vouches for', () => {
    const manifest = (publisherCertificate?: string, sources = [{ instanceId: 'trainer-0', address: '10.0.0.9:7100' }]) =>
      createMessage(
        'WeightVersionPublished',
        {
          version: 4,
          step: 4,
          buckets: [{ index: 0, sizeBytes: 8, checksum: 'c0' }],
          totalBytes: 8,
          sources,
          ...(publisherCertificate ? { publisherCertificate } : {}),
        },
        { ...at, source: 'agent/trainer-0' },
      );
    const check = (m: RobustrlMessage, by: string) => agent.verify(signed(m, machine(by)), m);
    const certificate = roleCertificateOf(SECRET, 'trainer-0', 'trainer');
    expect(check(manifest(certificate), 'trainer-0')).toBeNull();
    expect(check(manifest(roleCertificateOf(SECRET, 'trainer-0', 'hybrid')), 'trainer-0')).toBeNull();
    expect(check(manifest(), 'rollout-3')).toMatch(/the manifest of version 4 from trainer-0 carries no role certificate/);
    // The trainer's certificate copied onto a manifest the rogue signs with its own key.
    expect(check(manifest(certificate), 'rollout-3')).toMatch(/publisher signature that does not hold under its certified key/);
    expect(check(manifest(roleCertificateOf(SECRET, 'rollout-3', 'trainer')), 'rollout-3')).toMatch(/role certificate that does not hold for it/);
    expect(check(manifest(roleCertificateOf(SECRET, 'trainer-0', 'rollout')), 'trainer-0')).toMatch(/does not hold for it/);
    expect(
      check(
        manifest(certificate, [
          { instanceId: 'trainer-0', address: 'a:1' },
          { instanceId: 'trainer-1', address: 'b:1' },
        ]),
        'trainer-0',
      ),
    ).toMatch(/names 2 source machines, not one/);
    // Unsigned (no publisher header).
    const m = manifest(certificate);
    const r = signed(m, machine('trainer-0'));
    const { 'robustrl-publisher-signature': _dropped, ...headers } = r.headers;
    expect(agent.verify({ ...r, headers }, m)).toMatch(/carries no publisher signature/);
  });

  it('an agent is refused at start as a trainer without its certificate, or with one that does not hold', () => {
    const key = machineKeyText(machineKeyOf(SECRET, 'trainer-0'));
    const publicKey = publicKeyText(controlPlaneRecordKeyPairOf(SECRET).publicKey);
    expect(() => roleCertificateFromEnv({ ROBUSTRL_MACHINE_KEY: key }, 'trainer-0', 'trainer')).toThrow(
      /ROBUSTRL_ROLE_CERTIFICATE: a trainer machine shows .*robustrl identity role-certificate trainer-0 trainer/,
    );
    expect(roleCertificateFromEnv({ ROBUSTRL_MACHINE_KEY: key }, 'rollout-3', 'rollout')).toBeUndefined();
    // Another machine's certificate: caught by its publisher half alone, without the control plane's key.
    expect(() =>
      roleCertificateFromEnv(
        { ROBUSTRL_MACHINE_KEY: key, ROBUSTRL_ROLE_CERTIFICATE: roleCertificateOf(SECRET, 'trainer-1', 'trainer') },
        'trainer-0',
        'trainer',
      ),
    ).toThrow(/does not hold for machine trainer-0 as trainer/);
    expect(roleCertificateFromEnv({}, 'trainer-0', 'trainer')).toBeUndefined();
    const good = roleCertificateOf(SECRET, 'trainer-0', 'trainer');
    expect(
      roleCertificateFromEnv(
        { ROBUSTRL_MACHINE_KEY: key, ROBUSTRL_ROLE_CERTIFICATE: good, ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY: publicKey },
        'trainer-0',
        'trainer',
      ),
    ).toBe(good);
    expect(() =>
      roleCertificateFromEnv(
        {
          ROBUSTRL_MACHINE_KEY: key,
          ROBUSTRL_ROLE_CERTIFICATE: roleCertificateOf(SECRET, 'trainer-1', 'trainer'),
          ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY: publicKey,
        },
        'trainer-0',
        'trainer',
      ),
    ).toThrow(/does not hold for machine trainer-0 as trainer/);
  });
});
