import { BusHealth, InProcessBus } from '@robustrl/bus';
import { createMessage, DataOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { DETECTOR_INPUT_TYPES, DetectorEvent, DetectorInput, DetectorState } from '@robustrl/detector-domain';
import { DecidingConsumer } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { DETECTOR_INPUTS } from './detector.module';
import { detectionGaps, detectorFromEnv } from './detector-runtime';

/**
 * The detector's shell watches its own input (docs/contributors/detection.md "Detection knows when it is blind"): a broker
 * outage seen through bus health pauses detection in every job (DetectionPaused on the verdicts topic),
 * no tick runs while blind, and the resume after it discounts the gap — so 90 s of missing input leads
 * to no probe and no verdict, while a machine that really stays silent after the gap is still caught.
 * In-process bus and an embedded PostgreSQL; the bus's health is what the test says it is; time is virtual.
 */
const JOB = 'gap-job';
const ROLLOUTS = ['rollout-0', 'rollout-1', 'rollout-2'];

describe('detector shell: a broker outage is not machine silence', () => {
  let bus: InProcessBus;
  let store: EventStore;
  let now: number;
  let consumer: DecidingConsumer<DetectorState, DetectorEvent, DetectorInput>;
  let seen: RobustrlMessage[];
  let brokerUp: boolean;
  let realHealth: () => Promise<BusHealth>;
  /** The detector has taken everything published (virtual time must not run ahead of a consumer that keeps up in real time). */
  const caughtUp = () =>
    eventually('the detector caught up', async () =>
      (await realHealth()).subscriptions.find((s) => s.groupId === 'robustrl-detector')?.lag === 0 ? true : undefined,
    );

  const msg = <T extends MessageType>(type: T, data: DataOf<T>) =>
    createMessage(type, data, { jobId: JOB, source: 'spec', occurredAt: new Date(now).toISOString() });
  const sample = (machineId: string) =>
    msg('RolloutThroughputSampled', {
      machineId,
      rolloutId: machineId,
      sampledAt: new Date(now).toISOString(),
      windowSeconds: 5,
      tokensPerSecond: 800,
      completedRequests: 2,
      inFlightRequests: 4,
      awaitingTools: 0,
    });
  const typesSeen = (type: MessageType) => seen.filter((m) => m.type === type);

  async function start(watchInput: boolean) {
    now = Date.parse('2026-11-23T10:00:00Z');
    brokerUp = true;
    seen = [];
    bus = new InProcessBus();
    realHealth = bus.health.bind(bus);
    jest
      .spyOn(bus, 'health')
      .mockImplementation(async (): Promise<BusHealth> =>
        brokerUp ? realHealth() : { reachable: false, error: 'connect ECONNREFUSED 127.0.0.1:9092', subscriptions: [] },
      );
    store = await EventStore.open({ kind: 'pglite' });
    const { decider } = detectorFromEnv({});
    consumer = new DecidingConsumer(bus, store, {
      consumer: 'detector',
      topics: DETECTOR_INPUTS,
      inputTypes: DETECTOR_INPUT_TYPES,
      decider,
      // The test moves time and samples health itself.
      tickIntervalMs: 3_600_000,
      clock: () => now,
      ...(watchInput ? { inputGaps: { ...detectionGaps(10_000), sampleIntervalMs: 3_600_000 } } : {}),
    });
    await bus.subscribe({ groupId: 'spec-audit', topics: [Topics.verdicts, Topics.heartbeat], handler: async (d) => void seen.push(d.message) });
    await consumer.start();
    // Its own start is a gap too (closed at once here: nothing to catch up on, no job yet to resume).
    if (watchInput) await eventually('caught up after start', () => (consumer.inputGap() === null ? true : undefined));
    await bus.publish(
      msg('JobStarted', {
        mode: 'async',
        resumedFromStep: null,
        trainerMachines: 0,
        rolloutMachines: ROLLOUTS.length,
        detection: { rolloutSilentWindowSeconds: 60, probeTimeoutSeconds: 10, resumeGraceSeconds: 30 },
      }),
    );
    for (const id of ROLLOUTS) {
      await bus.publish(
        msg('MachineRegistered', { machineId: id, role: 'rollout', zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `${id}:8086`, dpRank: 0 }),
      );
    }
    // Telemetry and membership are different topics, ordered each on its own: samples after the registrations.
    await eventually('registered', () => (consumer.stateOf(JOB)?.machines['rollout-2'] ? true : undefined));
    await bus.publish(ROLLOUTS.map(sample));
    await eventually('the job applied', () => (consumer.stateOf(JOB)?.machines['rollout-2']?.lastThroughput ? true : undefined));
  }

  /** Advance virtual time second by second, ticking (and sampling health) each second; `live` machines report every 5 s. */
  async function run(seconds: number, live: readonly string[]) {
    for (let i = 0; i < seconds; i++) {
      now += 1_000;
      if (brokerUp && i % 5 === 4) {
        await bus.publish(live.map(sample));
        await caughtUp();
      }
      await consumer.sampleInput();
      await consumer.tickNow();
    }
    await consumer.relay();
  }

  afterEach(async () => {
    await consumer.stop();
    await bus.close();
    await store.close();
  });

  it('90 s without a broker: paused and resumed in the job, no probe, no verdict; a rollout silent after the gap is still probed and confirmed', async () => {
    await start(true);
    await run(10, ROLLOUTS);
    expect(consumer.inputGap()).toBeNull(); // caught up after its own start

    brokerUp = false; // agents cannot publish either
    await run(90, ROLLOUTS);
    expect(consumer.inputGap()).toEqual(expect.objectContaining({ reason: 'broker-unreachable' }));
    brokerUp = true;
    // rollout-2 died during the outage: it never reports again.
    await run(40, ROLLOUTS.slice(0, 2));
    await eventually('pause and resume relayed', () => (typesSeen('DetectionResumed').length === 1 ? true : undefined));

    expect(typesSeen('DetectionPaused')).toEqual([expect.objectContaining({ jobId: JOB, data: expect.objectContaining({ reason: 'broker-unreachable' }) })]);
    const [resumed] = typesSeen('DetectionResumed');
    expect(resumed.type === 'DetectionResumed' && resumed.data.blindMs).toBeGreaterThanOrEqual(90_000);
    expect(typesSeen('HeartbeatProbeRequested')).toEqual([]);
    expect(typesSeen('FaultConfirmed')).toEqual([]);

    // rollout-2 last reported as the gap began: its 60 s window counts from the gap's end, then the probe's 10 s.
    await run(35, ROLLOUTS.slice(0, 2));
    await eventually('rollout-2 confirmed', () => (typesSeen('FaultConfirmed').length > 0 ? true : undefined));
    expect(typesSeen('HeartbeatProbeRequested').map((m) => m.type === 'HeartbeatProbeRequested' && m.data.machineId)).toEqual(['rollout-2']);
    expect(typesSeen('FaultConfirmed').map((m) => m.type === 'FaultConfirmed' && m.data.machineId)).toEqual(['rollout-2']);
  });

  it('without watching its input the same outage probes and confirms every rollout (the defect this prevents)', async () => {
    await start(false);
    await run(10, ROLLOUTS);
    brokerUp = false;
    await run(90, ROLLOUTS);
    brokerUp = true;
    await run(5, ROLLOUTS);
    expect(typesSeen('HeartbeatProbeRequested')).toHaveLength(ROLLOUTS.length);
    expect(typesSeen('FaultConfirmed')).toHaveLength(ROLLOUTS.length);
  });

  it('runs no tick while blind even when the pause cannot be recorded (store down), and records it once the store is back', async () => {
    await start(true);
    await run(10, ROLLOUTS);
    brokerUp = false;
    const transaction = jest.spyOn(store.dataSource.manager, 'query').mockRejectedValue(new Error('connect ECONNREFUSED 127.0.0.1:5432'));
    await run(90, ROLLOUTS);
    transaction.mockRestore();
    // The pause never committed while the store was down…
    expect((await store.readJob(JOB)).map((l) => l.message.type)).not.toContain('DetectionPaused');
    await run(1, ROLLOUTS);
    await eventually('the pause recorded once the store is back', () => (consumer.stateOf(JOB)?.blind ? true : undefined));
    expect(consumer.stateOf(JOB)?.blind).toEqual(expect.objectContaining({ reason: 'broker-unreachable' }));
    brokerUp = true;
    await run(30, ROLLOUTS);
    await eventually('relayed', () => (typesSeen('DetectionResumed').length === 1 ? true : undefined));
    expect(typesSeen('FaultSuspected')).toEqual([]); // …and still no tick judged the outage as silence
    expect(typesSeen('FaultConfirmed')).toEqual([]);
  });
});

describe('detector shell: watching its input is configured from the environment', () => {
  it('watches its input unless ROBUSTRL_DETECTOR_INPUT_GAPS=off, reads its lag tolerance and grace, and refuses bad values', () => {
    const watching = detectorFromEnv({ ROBUSTRL_DETECTOR_INPUT_LAG_TOLERANCE_SECONDS: '4', ROBUSTRL_DETECTOR_RESUME_GRACE_SECONDS: '12' });
    expect(watching.inputGaps?.lagToleranceMs).toBe(4_000);
    expect(watching.defaults.resumeGraceMs).toBe(12_000);
    expect(detectorFromEnv({ ROBUSTRL_DETECTOR_INPUT_GAPS: 'off' }).inputGaps).toBeUndefined();
    expect(() => detectorFromEnv({ ROBUSTRL_DETECTOR_INPUT_GAPS: 'maybe' })).toThrow(/ROBUSTRL_DETECTOR_INPUT_GAPS/);
    expect(() => detectorFromEnv({ ROBUSTRL_DETECTOR_INPUT_LAG_TOLERANCE_SECONDS: '-1' })).toThrow(/ROBUSTRL_DETECTOR_INPUT_LAG_TOLERANCE_SECONDS/);
  });
});
