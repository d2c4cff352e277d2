import { ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { ALL_TOPICS, createMessage, DEAD_LETTER_TOPIC, Topics } from '@robustrl/contracts';
import { KafkaBus } from '@robustrl/bus';
import { eventually } from '@robustrl/testing/eventually';

const CLI = join(__dirname, '..', 'bin', 'robustrl.js');

/** `robustrl tail` in its own process, reading what this (another) process publishes to the real broker. */
describe('robustrl tail', () => {
  const brokers = () => process.env.KAFKA_BROKERS!.split(',');
  let bus: KafkaBus;
  let tailProcess: ChildProcessWithoutNullStreams | undefined;
  // A deployment of its own on the shared broker: tail sees only what this file publishes.
  const topicPrefix = `test-${randomUUID()}.`;
  beforeAll(async () => {
    bus = new KafkaBus({ brokers: brokers(), clientId: 'tail-test', topicPrefix, logger: { info() {}, warn() {}, error: console.error } });
    await bus.ensureTopics();
  });
  afterEach(() => tailProcess?.kill('SIGTERM'));
  afterAll(() => bus.close());

  function startTail(args: string[]) {
    const lines: string[] = [];
    let stderr = '';
    tailProcess = spawn(process.execPath, [CLI, 'tail', '--topic-prefix', topicPrefix, ...args], { env: process.env });
    tailProcess.stdout.setEncoding('utf8').on('data', (chunk: string) => lines.push(...chunk.split('\n').filter(Boolean)));
    tailProcess.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    return { lines, stderr: () => stderr };
  }

  it('prints one readable line per event of the job, and the dead letters', async () => {
    const jobId = `job-${randomUUID()}`;
    const occurredAt = new Date().toISOString();
    await bus.publish([
      createMessage(
        'MachineRegistered',
        { machineId: 'rollout-3', role: 'rollout', zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: '10.0.0.3:7070', dpRank: 3 },
        { jobId, source: 'tail-test', occurredAt },
      ),
      createMessage(
        'FaultConfirmed',
        {
          verdictId: 'v-9',
          machineId: 'rollout-3',
          role: 'rollout',
          rule: 'rollout-silent',
          evidence: { windowSeconds: 60 },
          handledAs: 'rollout',
          machineFaulty: true,
          detectionLatencyMs: 64_000,
        },
        { jobId, source: 'tail-test', occurredAt },
      ),
    ]);
    await bus.publishRaw({
      topic: DEAD_LETTER_TOPIC,
      key: jobId,
      value: 'garbage',
      headers: {
        'x-dead-letter-reason': 'not JSON: demo',
        'x-dead-letter-kind': 'invalid',
        'x-original-topic': Topics.telemetry,
        'x-original-partition': '0',
        'x-original-offset': '12',
        'x-consumer-group': 'robustrl-detector',
        'x-dead-lettered-at': occurredAt,
      },
    });

    const tail = startTail(['--job', jobId, '--from-beginning']);
    const lines = await eventually('three lines from tail', () => (tail.lines.length >= 3 ? tail.lines : undefined), 45_000);
    expect(lines.find((l) => l.includes('MachineRegistered'))).toMatch(
      new RegExp(`membership +MachineRegistered +job=${jobId} machineId=rollout-3 role=rollout`),
    );
    expect(lines.find((l) => l.includes('FaultConfirmed'))).toMatch(/verdicts +FaultConfirmed .*rule=rollout-silent .*detectionLatencyMs=64000/);
    expect(lines.find((l) => l.includes('dead-letter'))).toMatch(/robustrl\.telemetry\/0@12 .*group=robustrl-detector invalid: not JSON: demo/);
    // Every robustrl topic and the dead letters.
    expect(tail.stderr()).toMatch(new RegExp(`following ${ALL_TOPICS.length + 1} topic\\(s\\)`));
  });

  it('prints JSON with --json and follows events published after it started', async () => {
    const jobId = `job-${randomUUID()}`;
    const tail = startTail(['--job', jobId, '--json', '--topic', 'training']);
    await eventually('tail to join its group', () => (/following/.test(tail.stderr()) ? true : undefined), 45_000);
    const event = createMessage(
      'CheckpointSaved',
      { step: 12, uri: 's3://ckpt/12', blockingMs: 900 },
      { jobId, source: 'tail-test', occurredAt: new Date().toISOString() },
    );
    await bus.publish(event);
    const line = await eventually('the JSON line', () => tail.lines[0], 45_000);
    expect(JSON.parse(line)).toMatchObject({ topic: Topics.training, message: event });
  });

  it('reads the same topic as kcat -C', async () => {
    const jobId = `job-${randomUUID()}`;
    const event = createMessage(
      'TrainingStepStarted',
      { step: 1, batchId: 'b1', startedAt: new Date().toISOString() },
      { jobId, source: 'tail-test', occurredAt: new Date().toISOString() },
    );
    await bus.publish(event);
    const kcat = ['kcat', 'kafkacat'].find((bin) => {
      try {
        execFileSync('which', [bin]);
        return true;
      } catch {
        return false;
      }
    });
    if (!kcat) throw new Error('kcat is not installed: deploy/local/kafka.sh install installs it (Debian package kafkacat)');
    const out = execFileSync(kcat, ['-b', brokers()[0], '-C', '-t', topicPrefix + Topics.training, '-o', 'beginning', '-e', '-q', '-f', '%k %h %s\\n'], {
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    });
    const mine = out.split('\n').filter((l) => l.startsWith(`${jobId} `));
    expect(mine).toHaveLength(1);
    expect(mine[0]).toContain('robustrl-type=TrainingStepStarted');
    expect(JSON.parse(mine[0].slice(mine[0].indexOf('{')))).toMatchObject({ eventId: event.eventId, data: event.data });

    const tail = startTail(['--job', jobId, '--json', '--from-beginning', '--topic', 'training', '--limit', '1']);
    const line = await eventually('the same event from tail', () => tail.lines[0], 45_000);
    expect(JSON.parse(line).message.eventId).toBe(event.eventId);
  });
});
