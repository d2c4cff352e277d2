import { randomBytes } from 'node:crypto';
import {
  busIdentityFromEnv,
  controllerKeyPairOf,
  controlPlaneRecordKeyPairOf,
  fromDeadLetterRecord,
  KafkaBus,
  machineKeyOf,
  machineKeyText,
  MachineSigner,
  MessageBus,
  publicKeyText,
  roleCertificateOf,
  Subscription,
} from '@robustrl/bus';
import { createMessage, DEAD_LETTER_TOPIC, MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { ControllerModule } from '@robustrl/controller';
import { DetectorModule } from '@robustrl/detector';
import { LocalProcessSupervisor, MachineSpec } from '@robustrl/orchestrator';
import { MESSAGE_BUS, RunningService, runService } from '@robustrl/service-kit';
import { agentMachines } from '@robustrl/testing/agent-machines';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { eventually } from '@robustrl/testing/eventually';
import { KafkaTopicReader } from '@robustrl/testing/kafka-topic-reader';

/**
 * "A machine speaks only for itself" (docs/operators/security.md "Who speaks on the bus"), end to end on the real broker and database: the control
 * plane holds the identity secret, each agent process only its own machine key and the controller's
 * public key. A compromised agent (rollout-a's key, used from this process) tries to speak for another
 * machine and to issue commands; the control plane and the agents drop what it sends, with the reason
 * in the dead-letter topic, while the genuine agents' records and the controller's commands go through.
 */
jest.setTimeout(120_000);

describe('who speaks on the bus, end to end (real Kafka, PostgreSQL, agent processes)', () => {
  const topicPrefix = `e2e-identity-${randomBytes(4).toString('hex')}.`;
  const brokers = (process.env.KAFKA_BROKERS ?? '').split(',');
  const secret = randomBytes(32).toString('base64url');
  // The controller's own command key (docs/operators/security.md "Who speaks on the bus"): the agents check commands against it.
  const commandSecret = randomBytes(32).toString('base64url');
  const jobId = `job-identity-${randomBytes(3).toString('hex')}`;
  const machines: MachineSpec[] = [
    { machineId: 'trainer-0', role: 'trainer', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    { machineId: 'rollout-a', role: 'rollout', zone: 'az-1', hardwareClass: 'cpu-e2e' },
    { machineId: 'rollout-b', role: 'rollout', zone: 'az-1', hardwareClass: 'cpu-e2e' },
  ];
  let database: { url: string; drop(): Promise<void> };
  let supervisor: LocalProcessSupervisor;
  let service: RunningService;
  let controlPlane: MessageBus;
  let compromised: KafkaBus;
  let compromisedService: KafkaBus;
  let observer: Subscription;
  let deadLetters: KafkaTopicReader;
  const seen: RobustrlMessage[] = [];
  const output: string[] = [];
  const now = () => new Date().toISOString();
  const all = <T extends MessageType>(type: T, where: (m: MessageOf<T>) => boolean = () => true) =>
    seen.filter((m): m is MessageOf<T> => m.type === type && m.jobId === jobId && where(m as MessageOf<T>));
  const refusedWith = (pattern: RegExp) =>
    deadLetters.records.map(fromDeadLetterRecord).filter((d) => d.kind === 'unauthenticated' && d.key === jobId && pattern.test(d.reason));

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_identity');
    supervisor = agentMachines({
      brokers,
      topicPrefix,
      databaseUrl: () => database.url,
      output,
      // What an operator provisions per machine (robustrl identity machine-key / controller-public-key).
      env: (m) => ({
        ROBUSTRL_MACHINE_KEY: machineKeyText(machineKeyOf(secret, m.machineId)),
        ROBUSTRL_CONTROLLER_PUBLIC_KEY: publicKeyText(controllerKeyPairOf(commandSecret).publicKey),
        ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY: publicKeyText(controlPlaneRecordKeyPairOf(secret).publicKey),
        // A trainer shows the operator's word that it may train (robustrl identity role-certificate).
        ...(m.role === 'trainer' ? { ROBUSTRL_ROLE_CERTIFICATE: roleCertificateOf(secret, m.machineId, 'trainer') } : {}),
        E2E_STEP_SECONDS: '1',
      }),
    });
    service = await runService(
      {
        serviceName: 'e2e-control-plane',
        bus: { adapter: 'kafka', brokers, clientId: 'e2e-identity', topicPrefix },
        store: { kind: 'postgres', url: database.url },
        httpPort: null,
        identity: busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET: secret, ROBUSTRL_CONTROLLER_COMMAND_SECRET: commandSecret }, { service: 'e2e-control-plane' }),
      },
      [DetectorModule, ControllerModule.withOrchestrator(supervisor)],
      { logLevels: ['error'] },
    );
    controlPlane = service.app.get<MessageBus>(MESSAGE_BUS);
    // The observer reads through the control plane's verifier: it sees what the control plane accepts.
    observer = await controlPlane.subscribe({
      groupId: 'e2e-identity-observer',
      topics: Object.values(Topics),
      handler: async (d) => void seen.push(d.message),
    });
    deadLetters = await new KafkaTopicReader(brokers, topicPrefix + DEAD_LETTER_TOPIC).start();
    compromised = new KafkaBus({
      brokers,
      clientId: 'e2e-compromised-rollout-a',
      topicPrefix,
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
      identity: { signer: new MachineSigner('rollout-a', machineKeyOf(secret, 'rollout-a')) },
    });
    // A service that holds the identity secret but not the controller's command secret.
    compromisedService = new KafkaBus({
      brokers,
      clientId: 'e2e-compromised-service',
      topicPrefix,
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
      identity: busIdentityFromEnv({ ROBUSTRL_IDENTITY_SECRET: secret }, { service: 'rollout-manager' }),
    });

    await controlPlane.publish(
      createMessage(
        'JobStarted',
        {
          mode: 'semi-sync',
          resumedFromStep: null,
          trainerMachines: 1,
          rolloutMachines: 2,
          detection: { trainerIdleWindowSeconds: 30, rolloutSilentWindowSeconds: 10, probeTimeoutSeconds: 5 },
        },
        { jobId, source: 'e2e', occurredAt: now() },
      ),
    );
    await supervisor.launchJob(jobId, machines);
  });

  afterAll(async () => {
    await observer?.close();
    await compromised?.close();
    await compromisedService?.close();
    await deadLetters?.stop();
    await supervisor?.close();
    await service?.stop();
    await database?.drop();
  });

  it('the agents sign as their machines: registrations and telemetry reach the control plane', async () => {
    for (const m of machines) await eventually(`${m.machineId} registered`, () => all('MachineRegistered', (r) => r.data.machineId === m.machineId)[0], 45_000);
    await eventually('rollout-a sampled', () => all('GpuActivitySampled', (s) => s.data.machineId === 'rollout-a')[0], 20_000);
    expect(refusedWith(/./).filter((d) => d.originalTopic !== Topics.control)).toEqual([]);
  });

  it("rollout-a's key cannot speak for rollout-b: its fault reports are dropped with the reason, rollout-b stays", async () => {
    const fault = (source: string) =>
      createMessage(
        'AgentFaultSignalled',
        { machineId: 'rollout-b', role: 'rollout', signal: 'xid-error', detail: 'forged', exitCode: null, observedAt: now() },
        { jobId, source, occurredAt: now() },
      );
    await compromised.publish(fault('agent/rollout-a'));
    await compromised.publish(fault('agent/rollout-b'));
    await eventually('both reports refused by the control plane', () => {
      const speaksFor = refusedWith(/signed by machine:rollout-a but speaks for machine 'rollout-b'/);
      const sentAs = refusedWith(/signed by machine:rollout-a but sent as 'agent\/rollout-b'/);
      return speaksFor.length > 0 && sentAs.length > 0 ? true : undefined;
    });
    // An explicit fault confirms at once when accepted: nothing came of these.
    await new Promise((r) => setTimeout(r, 2_000));
    expect(all('AgentFaultSignalled', (m) => m.data.detail === 'forged')).toEqual([]);
    expect(all('FaultConfirmed', (m) => m.data.machineId === 'rollout-b')).toEqual([]);
  });

  it("rollout-a's key cannot retire a version or release the trainer: the control plane and the agents refuse it", async () => {
    const retired = createMessage('WeightVersionRetired', { version: 1 }, { jobId, source: 'agent/rollout-a', occurredAt: now() });
    const released = createMessage(
      'TrainerReleased',
      { version: 1, step: 1, reason: 'all-rollouts-hold' },
      { jobId, source: 'agent/rollout-a', occurredAt: now() },
    );
    await compromised.publish(retired);
    await compromised.publish(released);
    // Each is dead-lettered once, by whichever reader refused it first: the control plane (a machine
    // publishes no decision of the control plane's) or an agent (no control-plane record signature).
    const refused = (type: string) =>
      refusedWith(
        new RegExp(
          `${type} is the control plane's to publish, not a machine's \\(signed by machine:rollout-a\\)|${type} not published by the control plane \\(signer 'machine:rollout-a'\\): ignored`,
        ),
      );
    await eventually('both refused', () => (refused('WeightVersionRetired').length > 0 && refused('TrainerReleased').length > 0 ? true : undefined), 30_000);
    expect(all('WeightVersionRetired')).toEqual([]);
    expect(all('TrainerReleased')).toEqual([]);
  });

  it("rollout-a's key cannot make it a trainer: registering as one (with no certificate, with trainer-0's) or promoting itself is refused", async () => {
    const asTrainer = (roleCertificate?: string) =>
      createMessage(
        'MachineRegistered',
        {
          machineId: 'rollout-a',
          role: 'trainer',
          zone: 'az-1',
          hardwareClass: 'cpu-e2e',
          gpus: 1,
          agentAddress: 'http://127.0.0.1:9',
          hostAddress: '127.0.0.1',
          // Rank 0 of the trainer group: the rendezvous every trainer's first launch would meet at.
          dpRank: 0,
          ...(roleCertificate ? { roleCertificate } : {}),
        },
        { jobId, source: 'agent/rollout-a', occurredAt: now() },
      );
    const promoted = createMessage(
      'MachineRoleChanged',
      { machineId: 'rollout-a', from: 'rollout', to: 'trainer', reason: 'forged promotion' },
      { jobId, source: 'agent/rollout-a', occurredAt: now() },
    );
    await compromised.publish(asTrainer());
    await compromised.publish(asTrainer(roleCertificateOf(secret, 'trainer-0', 'trainer')));
    await compromised.publish(promoted);
    await eventually(
      'all three refused',
      () =>
        refusedWith(/MachineRegistered claims the trainer role for rollout-a without a role certificate/).length > 0 &&
        refusedWith(/MachineRegistered claims the trainer role for rollout-a with a role certificate that does not hold/).length > 0 &&
        refusedWith(/MachineRoleChanged claims the trainer role for rollout-a without a role certificate/).length > 0
          ? true
          : undefined,
      30_000,
    );
    expect(all('MachineRegistered', (m) => m.data.machineId === 'rollout-a' && m.data.role === 'trainer')).toEqual([]);
    expect(all('MachineRoleChanged', (m) => m.data.machineId === 'rollout-a')).toEqual([]);
    // trainer-0 registered with its certificate and was taken.
    expect(all('MachineRegistered', (m) => m.data.machineId === 'trainer-0')[0]?.data.roleCertificate).toBe(roleCertificateOf(secret, 'trainer-0', 'trainer'));
  });

  it("a command not from the controller (a machine's, an unsigned one, another service's) is not executed; the controller's is", async () => {
    const restart = (commandId: string, source: string) =>
      createMessage(
        'RestartRolloutEngine',
        { recoveryId: commandId, commandId, machineId: 'rollout-b', attempt: 1, budget: 2 },
        { jobId, source, occurredAt: now() },
      );
    // Signed by a machine, sent as the controller; the same without any signature; and by a service
    // that holds the identity secret but not the controller's command secret.
    await compromised.publish(restart('forged-by-machine', 'controller'));
    await compromised.publishRaw({ topic: Topics.control, key: jobId, value: JSON.stringify(restart('forged-unsigned', 'controller')) });
    await compromisedService.publish(restart('forged-by-service', 'controller'));
    // Each bad record is dead-lettered once, by whichever reader refused it first (an agent, or the
    // control plane's own reader): the reason says why.
    const refusal = (commandId: string) => refusedWith(/./).find((d) => d.value?.toString().includes(`"commandId":"${commandId}"`));
    const [byMachine, unsigned, byService] = await eventually('the forged commands refused', () => {
      const found = [refusal('forged-by-machine'), refusal('forged-unsigned'), refusal('forged-by-service')];
      return found.every(Boolean) ? found : undefined;
    });
    // The control plane takes the service's record as its own (its HMAC holds); the agent does not
    // execute it: the command signature is not the controller's.
    expect(byService!.reason).toMatch(/RestartRolloutEngine carries a controller signature that does not hold: not executed/);
    expect(byMachine!.reason).toMatch(
      /signed by machine:rollout-a but sent as 'controller'|not issued by the controller \(source 'controller', signer 'machine:rollout-a'\)/,
    );
    expect(unsigned!.reason).toMatch(/unsigned record|not issued by the controller \(source 'controller', signer 'none'\)/);

    // The control plane's own command, sent as the controller, is executed by the same agent: the
    // forged ones were not executed for want of a controller signature, nothing else.
    await controlPlane.publish(restart('genuine', 'controller'));
    const done = await eventually('rollout-b restarted its engine', () => all('RecoveryCommandSucceeded', (m) => m.data.commandId === 'genuine')[0], 30_000);
    expect(done.data).toMatchObject({ machineId: 'rollout-b', executor: 'agent/rollout-b' });
    expect(all('RecoveryCommandSucceeded', (m) => m.data.commandId.startsWith('forged'))).toEqual([]);
    expect(all('RecoveryCommandFailed', (m) => m.data.commandId.startsWith('forged'))).toEqual([]);
  });
});
