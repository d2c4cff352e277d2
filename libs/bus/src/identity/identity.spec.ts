import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMessage, encodeMessage, RobustrlMessage, topicOf } from '@robustrl/contracts';
import { busIdentityFromEnv } from './identity-config';
import { controllerKeyPairOf, controlPlaneRecordKeyPairOf, machineKeyOf, machineKeyText, publicKeyFromText, publicKeyText } from './identity-keys';
import { IdentityHeaders, RecordSigner } from './record-identity';
import { MachineSigner, ServiceSigner } from './signers';
import { AgentCommandVerifier, ControlPlaneVerifier } from './verifiers';

const SECRET = 'identity-spec-secret-0123456789abcdef';
const OTHER_SECRET = 'another-deployment-secret-0123456789ab';
const at = { jobId: 'job-1', occurredAt: '2026-11-24T00:00:00.000Z' };

/** A record as the bus puts it on the wire: its bytes and the signer's headers. */
function signed(message: RobustrlMessage, signer?: RecordSigner) {
  const topic = topicOf(message.type);
  const value = encodeMessage(message);
  return { topic, key: message.jobId, value, headers: signer ? signer.sign({ topic, key: message.jobId, value }, message) : {} };
}

const gpu = (machineId: string, source: string) =>
  createMessage('GpuActivitySampled', { machineId, sampledAt: at.occurredAt, intervalSeconds: 10, tensorActive: 0.5, source: 'emulated' }, { ...at, source });
const restart = (source: string) =>
  createMessage('RestartRolloutEngine', { recoveryId: 'r-1', commandId: 'r-1/1', machineId: 'm-1', attempt: 1, budget: 2 }, { ...at, source });

describe('record identity: the control plane checks everyone', () => {
  const verifier = new ControlPlaneVerifier(SECRET);
  const machine = (id: string, secret = SECRET) => new MachineSigner(id, machineKeyOf(secret, id));
  const check = (m: RobustrlMessage, signer?: RecordSigner) => {
    const r = signed(m, signer);
    return verifier.verify(r, m);
  };

  it('takes a machine speaking for itself and a service speaking as itself', () => {
    expect(check(gpu('m-1', 'agent/m-1'), machine('m-1'))).toBeNull();
    expect(check(gpu('m-1', 'controller'), new ServiceSigner('controller', SECRET))).toBeNull();
    expect(check(gpu('m-1', 'rollout-manager/router'), new ServiceSigner('rollout-manager', SECRET))).toBeNull();
  });

  it('refuses a machine speaking for another, and a machine issuing a command', () => {
    expect(check(gpu('m-2', 'agent/m-1'), machine('m-1'))).toMatch(/signed by machine:m-1 but speaks for machine 'm-2'/);
    expect(check(gpu('m-2', 'agent/m-2'), machine('m-1'))).toMatch(/signed by machine:m-1 but sent as 'agent\/m-2'/);
    expect(check(restart('agent/m-1'), machine('m-1'))).toMatch(/RestartRolloutEngine is a command, and machines issue none/);
    // Nor the control plane's decisions: a retirement from a machine would retire the version at the registry too.
    expect(check(createMessage('WeightVersionRetired', { version: 7 }, { ...at, source: 'agent/m-1' }), machine('m-1'))).toMatch(
      /WeightVersionRetired is the control plane's to publish, not a machine's \(signed by machine:m-1\)/,
    );
    // A pull's outcome speaks for its puller; its source is a reference to another machine, not a claim.
    const pulled = (pullerId: string) =>
      createMessage(
        'WeightPullCompleted',
        { pullId: 'p-1', version: 3, bucketIndex: 0, pullerId, sourceId: 'trainer-0', bytes: 10, durationMs: 1 },
        { ...at, source: 'agent/m-1' },
      );
    expect(check(pulled('m-1'), machine('m-1'))).toBeNull();
    expect(check(pulled('m-2'), machine('m-1'))).toMatch(/speaks for machine 'm-2'/);
  });

  it('refuses the unsigned, the tampered, keys of another deployment and unknown signers', () => {
    expect(check(gpu('m-1', 'agent/m-1'))).toMatch(/unsigned record/);
    const honest = gpu('m-1', 'agent/m-1');
    const r = signed(honest, machine('m-1'));
    const tampered = { ...r, value: Buffer.from(r.value.toString().replace('"tensorActive":0.5', '"tensorActive":0.9')) };
    expect(verifier.verify(tampered, honest)).toMatch(/the signature does not hold for machine:m-1/);
    expect(verifier.verify({ ...r, key: 'job-2' }, honest)).toMatch(/does not hold/);
    expect(check(honest, machine('m-1', OTHER_SECRET))).toMatch(/does not hold/);
    expect(check(gpu('m-1', 'controller'), new ServiceSigner('controller', OTHER_SECRET))).toMatch(/does not hold for service:controller/);
    expect(verifier.verify({ ...r, headers: { ...r.headers, [IdentityHeaders.signer]: 'root:m-1' } }, honest)).toMatch(/unknown signer 'root:m-1'/);
  });
});

describe('record identity: an agent executes only the controller’s commands', () => {
  const agent = new AgentCommandVerifier(publicKeyFromText(publicKeyText(controllerKeyPairOf(SECRET).publicKey)));
  const check = (m: RobustrlMessage, signer?: RecordSigner) => agent.verify(signed(m, signer), m);

  it('takes a command the controller signed, in its own process or with other modules, and anything that is not a command', () => {
    expect(check(restart('controller'), new ServiceSigner('controller', SECRET))).toBeNull();
    expect(check(restart('controller/executor'), new ServiceSigner('embedded', SECRET))).toBeNull();
    expect(check(gpu('m-1', 'detector'))).toBeNull();
  });

  it('refuses a command from anyone else, unsigned, tampered, or signed by another deployment’s controller', () => {
    expect(check(restart('detector'), new ServiceSigner('detector', SECRET))).toMatch(
      /not issued by the controller \(source 'detector', signer 'service:detector'\)/,
    );
    expect(check(restart('agent/m-1'), new MachineSigner('m-1', machineKeyOf(SECRET, 'm-1')))).toMatch(/not issued by the controller/);
    expect(check(restart('controller'))).toMatch(/signer 'none'/);
    expect(check(restart('controller'), new ServiceSigner('controller', OTHER_SECRET))).toMatch(/signature that does not hold/);
    const m = restart('controller');
    const r = signed(m, new ServiceSigner('controller', SECRET));
    expect(agent.verify({ ...r, value: Buffer.from(r.value.toString().replace('r-1/1', 'r-1/2')) }, m)).toMatch(/does not hold/);
    // A control-plane HMAC alone (the header of a non-controller service copied over) is no command signature.
    expect(
      agent.verify({ ...r, headers: { [IdentityHeaders.signer]: 'service:controller', [IdentityHeaders.signature]: r.headers[IdentityHeaders.signature] } }, m),
    ).toMatch(/carries no controller command signature/);
  });
});

describe('record identity: an agent acts on a retirement, a release or a probe only when the control plane signed it', () => {
  const controlPlaneKey = publicKeyFromText(publicKeyText(controlPlaneRecordKeyPairOf(SECRET).publicKey));
  const agent = new AgentCommandVerifier(publicKeyFromText(publicKeyText(controllerKeyPairOf(SECRET).publicKey)), controlPlaneKey);
  const check = (m: RobustrlMessage, signer?: RecordSigner) => agent.verify(signed(m, signer), m);
  const retired = (source: string) => createMessage('WeightVersionRetired', { version: 7 }, { ...at, source });
  const released = (source: string) => createMessage('TrainerReleased', { version: 7, step: 7, reason: 'all-rollouts-hold' }, { ...at, source });

  it("takes the weight registry's, signed by any service of the control plane (every one holds the record key)", () => {
    expect(check(retired('weight-registry'), new ServiceSigner('weight-registry', SECRET))).toBeNull();
    expect(check(released('weight-registry'), new ServiceSigner('embedded', SECRET))).toBeNull();
    // With the controller's own command secret, services still sign records with the identity secret's record key.
    expect(check(retired('weight-registry'), busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET: SECRET }, { service: 'weight-registry' })!.signer)).toBeNull();
  });

  it("refuses one another agent wrote (any may write the weights topic), an unsigned one, another deployment's, a tampered one", () => {
    const rogue = new MachineSigner('rollout-9', machineKeyOf(SECRET, 'rollout-9'));
    expect(check(retired('agent/rollout-9'), rogue)).toMatch(/WeightVersionRetired not published by the control plane \(signer 'machine:rollout-9'\): ignored/);
    expect(check(released('weight-registry'))).toMatch(/signer 'none'/);
    expect(check(released('weight-registry'), new ServiceSigner('weight-registry', OTHER_SECRET))).toMatch(/record signature that does not hold/);
    const m = retired('weight-registry');
    const r = signed(m, new ServiceSigner('weight-registry', SECRET));
    expect(agent.verify({ ...r, value: Buffer.from(r.value.toString().replace('"version":7', '"version":8')) }, m)).toMatch(/does not hold/);
    // The control plane's HMAC alone is not the record signature.
    const { [IdentityHeaders.recordSignature]: _dropped, ...hmacOnly } = r.headers;
    expect(agent.verify({ ...r, headers: hmacOnly }, m)).toMatch(/carries no control-plane record signature/);
  });

  it('without the public key (a deployment from before it) an agent takes them as before; with it from its settings, it checks; other records are not signed twice', () => {
    const before = new AgentCommandVerifier(publicKeyFromText(publicKeyText(controllerKeyPairOf(SECRET).publicKey)));
    expect(before.verify(signed(retired('agent/rollout-9')), retired('agent/rollout-9'))).toBeNull();
    expect(signed(gpu('m-1', 'detector'), new ServiceSigner('detector', SECRET)).headers[IdentityHeaders.recordSignature]).toBeUndefined();
    const agentEnv = {
      ROBUSTRL_MACHINE_KEY: machineKeyText(machineKeyOf(SECRET, 'm-1')),
      ROBUSTRL_CONTROLLER_PUBLIC_KEY: publicKeyText(controllerKeyPairOf(SECRET).publicKey),
    };
    expect(() => busIdentityFromEnv({ ...agentEnv, ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY: 'not-a-key' }, { machineId: 'm-1' })).toThrow(
      /ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY/,
    );
    const configured = busIdentityFromEnv(
      { ...agentEnv, ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY: publicKeyText(controlPlaneRecordKeyPairOf(SECRET).publicKey) },
      { machineId: 'm-1' },
    )!;
    const rogue = retired('agent/rollout-9');
    expect(configured.verifier!.verify(signed(rogue, new MachineSigner('rollout-9', machineKeyOf(SECRET, 'rollout-9'))), rogue)).toMatch(
      /not published by the control plane/,
    );
  });
});

describe("the controller's own command secret: no other service can issue a command agents execute", () => {
  const COMMAND_SECRET = 'the-controllers-own-command-secret-0123456789';
  const agent = new AgentCommandVerifier(publicKeyFromText(publicKeyText(controllerKeyPairOf(COMMAND_SECRET).publicKey)));
  const check = (m: RobustrlMessage, signer: RecordSigner) => agent.verify(signed(m, signer), m);

  it('takes the command of the process holding it; a service with only the identity secret, sending as the controller, is refused', () => {
    const controller = busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET: SECRET, ROBUSTRL_CONTROLLER_COMMAND_SECRET: COMMAND_SECRET }, { service: 'controller' })!;
    expect(check(restart('controller'), controller.signer!)).toBeNull();
    // The control plane still takes it as one of its own (the HMAC is the identity secret's).
    expect(new ControlPlaneVerifier(SECRET).verify(signed(restart('controller'), controller.signer), restart('controller'))).toBeNull();
    const forger = busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET: SECRET }, { service: 'rollout-manager' })!;
    expect(check(restart('controller'), forger.signer!)).toMatch(/signature that does not hold/);
  });

  it('is refused short, and refused to an agent', () => {
    expect(() => busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET: SECRET, ROBUSTRL_CONTROLLER_COMMAND_SECRET: 'short' }, { service: 'controller' })).toThrow(
      /ROBUSTRL_CONTROLLER_COMMAND_SECRET must have at least 32/,
    );
    expect(() => busIdentityFromEnv({ ROBUSTRL_CONTROLLER_COMMAND_SECRET: COMMAND_SECRET }, { machineId: 'm-1' })).toThrow(/could issue commands/);
  });
});

describe('busIdentityFromEnv', () => {
  it('gives a service its signer and verifier from the secret (inline or a file), and nothing without one', () => {
    expect(busIdentityFromEnv({}, { service: 'detector' })).toBeUndefined();
    expect(busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET: SECRET }, { service: 'detector' })).toMatchObject({
      signer: expect.any(ServiceSigner),
      verifier: expect.any(ControlPlaneVerifier),
    });
    const dir = mkdtempSync(join(tmpdir(), 'robustrl-identity-'));
    writeFileSync(join(dir, 'secret'), `${SECRET}\n`);
    expect(busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET_FILE: join(dir, 'secret') }, { service: 'detector' })?.signer).toBeInstanceOf(ServiceSigner);
    expect(() => busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET: 'short' }, { service: 'detector' })).toThrow(/at least 32 characters/);
    expect(() => busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET: SECRET, ROBUSTRL_IDENTITY_SECRET_FILE: join(dir, 'secret') }, { service: 'x' })).toThrow(
      /both set/,
    );
    expect(() => busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET_FILE: join(dir, 'missing') }, { service: 'x' })).toThrow(/cannot read/);
  });

  it('gives an agent its machine signer and the command check, both keys or none, and refuses the secret itself', () => {
    const keys = {
      ROBUSTRL_MACHINE_KEY: machineKeyText(machineKeyOf(SECRET, 'm-1')),
      ROBUSTRL_CONTROLLER_PUBLIC_KEY: publicKeyText(controllerKeyPairOf(SECRET).publicKey),
    };
    expect(busIdentityFromEnv({}, { machineId: 'm-1' })).toBeUndefined();
    const identity = busIdentityFromEnv(keys, { machineId: 'm-1' })!;
    expect(identity.verifier).toBeInstanceOf(AgentCommandVerifier);
    // The key it was given signs as m-1, and the control plane takes it.
    const m = gpu('m-1', 'agent/m-1');
    expect(new ControlPlaneVerifier(SECRET).verify(signed(m, identity.signer), m)).toBeNull();
    expect(() => busIdentityFromEnv({ ROBUSTRL_MACHINE_KEY: keys.ROBUSTRL_MACHINE_KEY }, { machineId: 'm-1' })).toThrow(/go together/);
    expect(() => busIdentityFromEnv({ ...keys, ROBUSTRL_MACHINE_KEY: 'abc' }, { machineId: 'm-1' })).toThrow(/ROBUSTRL_MACHINE_KEY: a machine key is 32 bytes/);
    expect(() => busIdentityFromEnv({ ...keys, ROBUSTRL_CONTROLLER_PUBLIC_KEY: 'abc' }, { machineId: 'm-1' })).toThrow(
      /ROBUSTRL_CONTROLLER_PUBLIC_KEY: an Ed25519/,
    );
    expect(() => busIdentityFromEnv({ ...keys, ROBUSTRL_IDENTITY_SECRET: SECRET }, { machineId: 'm-1' })).toThrow(/could speak for every machine/);
  });
});
