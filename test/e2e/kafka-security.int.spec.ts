import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { busConfigFromEnv, createBus, MessageBus } from '@robustrl/bus';
import { createMessage, RobustrlMessage, Topics } from '@robustrl/contracts';
import { eventually } from '@robustrl/testing/eventually';
import { freePort } from '@robustrl/testing/free-port';

/**
 * Kafka security on a real broker: deploy/local/kafka.sh with KAFKA_SECURITY=sasl-ssl (TLS, SCRAM-SHA-512
 * logins, the StandardAuthorizer) on ports of its own, a login per client made by `kafka.sh principal`
 * with its role's topic ACLs (libs/bus/src/kafka/topic-acls.ts), and the bus configured from the
 * settings `principal` prints, as a service or an agent is.
 */
jest.setTimeout(120_000);

const ROOT = join(__dirname, '..', '..');
const KAFKA_SH = join(ROOT, 'deploy', 'local', 'kafka.sh');
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe('Kafka with TLS, SCRAM logins and topic ACLs (a secured broker of its own)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'robustrl-kafka-secure-'));
  const jobId = 'job-acl';
  let env: NodeJS.ProcessEnv;
  const buses: MessageBus[] = [];
  const settingsOf = (out: string): NodeJS.ProcessEnv =>
    Object.fromEntries(
      out
        .trim()
        .split('\n')
        .map((l) => l.split(/=(.*)/s).slice(0, 2)),
    );
  const kafkaSh = (...args: string[]) => execFileSync('bash', [KAFKA_SH, ...args], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const busOf = (settings: NodeJS.ProcessEnv, name: string) => {
    const bus = createBus(busConfigFromEnv(settings, `acl-test-${name}`), quiet);
    buses.push(bus);
    return bus;
  };
  const restart = (source: string) =>
    createMessage(
      'RestartRolloutEngine',
      { recoveryId: 'r-1', commandId: `r-1/${source}`, machineId: 'm-1', attempt: 1, budget: 2 },
      { jobId, source, occurredAt: new Date().toISOString() },
    );
  const sample = () =>
    createMessage(
      'GpuActivitySampled',
      { machineId: 'm-1', sampledAt: new Date().toISOString(), intervalSeconds: 10, tensorActive: 0.5, source: 'emulated' },
      { jobId, source: 'agent/m-1', occurredAt: new Date().toISOString() },
    );
  let controller: NodeJS.ProcessEnv;
  let detector: NodeJS.ProcessEnv;
  let requestManager: NodeJS.ProcessEnv;
  let operator: NodeJS.ProcessEnv;
  let agent: NodeJS.ProcessEnv;

  beforeAll(async () => {
    const shared = process.env.ROBUSTRL_LOCAL_DIR ?? join(ROOT, '.local');
    env = {
      ...process.env,
      ROBUSTRL_LOCAL_DIR: dir,
      KAFKA_LIBS_DIR: join(shared, 'kafka', 'libs'),
      KAFKA_PORT: String(await freePort()),
      KAFKA_CONTROLLER_PORT: String(await freePort()),
      KAFKA_SECURITY: 'sasl-ssl',
    };
    kafkaSh('start');
    controller = settingsOf(kafkaSh('principal', 'controller', 'controller'));
    detector = settingsOf(kafkaSh('principal', 'detector', 'detector'));
    requestManager = settingsOf(kafkaSh('principal', 'request-manager', 'request-manager'));
    operator = settingsOf(kafkaSh('principal', 'ops', 'operator'));
    agent = settingsOf(kafkaSh('principal', 'agent-m1', 'agent', 'm-1'));
  });

  afterAll(async () => {
    await Promise.all(buses.map((b) => b.close().catch(() => undefined)));
    try {
      kafkaSh('stop');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the controller's login creates the topics, publishes a command and reads it back, over TLS; an operator tails it", async () => {
    const bus = busOf(controller, 'controller');
    await bus.publish(restart('controller'));
    const seen: RobustrlMessage[] = [];
    await bus.subscribe({ groupId: 'robustrl-controller', topics: [Topics.control], handler: async (d) => void seen.push(d.message) });
    await eventually('the command read back', () => (seen.some((m) => m.type === 'RestartRolloutEngine') ? true : undefined), 30_000);
    // The operator's CLI on its own login: `robustrl tail` over TLS and SCRAM.
    const out = execFileSync(process.execPath, [join(ROOT, 'cli', 'bin', 'robustrl.js'), 'tail', '--topic', 'control', '--from-beginning', '--limit', '1'], {
      env: { PATH: process.env.PATH, ...operator },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(out).toMatch(/RestartRolloutEngine .*job=job-acl/);
  });

  it("an agent's login cannot publish a command or a verdict: the broker refuses; it can report, and read its commands", async () => {
    const bus = busOf(agent, 'agent');
    await expect(bus.publish(restart('agent/m-1'))).rejects.toThrow(/authoriz/i);
    const verdict = createMessage(
      'FaultConfirmed',
      {
        verdictId: 'v-1',
        machineId: 'm-2',
        role: 'rollout',
        rule: 'explicit-signal',
        handledAs: 'rollout',
        machineFaulty: true,
        detectionLatencyMs: 0,
        evidence: {},
      },
      { jobId, source: 'agent/m-1', occurredAt: new Date().toISOString() },
    );
    await expect(bus.publish(verdict)).rejects.toThrow(/authoriz/i);
    await bus.publish(sample());

    const commands: RobustrlMessage[] = [];
    await bus.subscribe({ groupId: 'robustrl-agent-m-1', topics: [Topics.control], handler: async (d) => void commands.push(d.message) });
    await eventually('the control plane’s command, and only it', () => (commands.length > 0 ? true : undefined), 30_000);
    expect(commands.map((m) => m.source)).toEqual(['controller']);
    // Another machine's consumer group is not this login's: the broker refuses it a coordinator
    // (GROUP_AUTHORIZATION_FAILED, which kafkajs reports as a coordinator not found), and the bus
    // reports the consumer down, restarting, with the likely cause.
    const other = busOf(agent, 'agent-other-group');
    await other.subscribe({ groupId: 'robustrl-agent-m-2', topics: [Topics.control], handler: async () => undefined });
    const refused = await eventually(
      'the join refused',
      async () =>
        (await other.health()).subscriptions.find(
          (s) => s.groupId === 'robustrl-agent-m-2' && s.restarts > 0 && /not be allowed the group/.test(s.error ?? ''),
        ),
      30_000,
    );
    expect(refused.running).toBe(false);
    // `robustrl tail` on an agent's login: verdicts are not its to read; the tail says so and exits.
    const tail = spawnSync(process.execPath, [join(ROOT, 'cli', 'bin', 'robustrl.js'), 'tail', '--topic', 'verdicts', '--from-beginning'], {
      env: { PATH: process.env.PATH, ...agent },
      encoding: 'utf8',
      timeout: 90_000,
    });
    expect({ status: tail.status, stderr: tail.stderr }).toEqual({ status: 1, stderr: expect.stringMatching(/authoriz|not be allowed/i) });
  });

  it('each service writes only its own outputs: the detector publishes a verdict and no command; the request manager neither', async () => {
    const verdict = createMessage(
      'SuspicionCleared',
      { verdictId: 'v-2', machineId: 'm-1', role: 'rollout', rule: 'rollout-silent', evidence: {}, reason: 'throughput resumed' },
      { jobId, source: 'detector', occurredAt: new Date().toISOString() },
    );
    const asDetector = busOf(detector, 'detector');
    await asDetector.publish(verdict);
    await expect(asDetector.publish(restart('detector'))).rejects.toThrow(/authoriz/i);
    const asRequestManager = busOf(requestManager, 'request-manager');
    await expect(asRequestManager.publish(restart('request-manager'))).rejects.toThrow(/authoriz/i);
    await expect(asRequestManager.publish(verdict)).rejects.toThrow(/authoriz/i);
  });

  it('a wrong password is refused at login, and a login is never sent without TLS', async () => {
    const wrong = busOf({ ...agent, KAFKA_SASL_PASSWORD_FILE: '', KAFKA_SASL_PASSWORD: 'not-the-password' }, 'wrong');
    await expect(wrong.publish(sample())).rejects.toThrow(/SASL|authentication/i);
    expect(() => busConfigFromEnv({ ...agent, KAFKA_SSL_CA_FILE: '' }, 'x')).toThrow(/needs TLS to the brokers/);
  });
});
