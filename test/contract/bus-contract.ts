import { randomUUID } from 'node:crypto';
import { createCausedMessage, createMessage, DataOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import {
  BusIdentity,
  ControlPlaneVerifier,
  DeadLetter,
  DeadLetterReference,
  Delivery,
  IdentityHeaders,
  machineKeyOf,
  MachineSigner,
  MessageBus,
  Subscription,
} from '@robustrl/bus';
import { EventStore } from '@robustrl/store';
import { installInMemoryTracing } from '@robustrl/telemetry';
import { eventually } from '@robustrl/testing/eventually';

/**
 * The bus contract, one suite for both adapters (Kafka and in-process). Every test works on its own
 * job id and consumer group, so it only sees its own records even on a broker with history.
 */
export interface BusContractFixture {
  bus: MessageBus;
  /** Store the idempotent consumer writes to (real PostgreSQL for Kafka, PGlite in-process). */
  store: EventStore;
  /** Dead-letter records written so far. */
  deadLetters(): DeadLetter[];
  /** A second bus of the same adapter with this identity (for Kafka on the same broker and topics). */
  withIdentity(identity: BusIdentity): Promise<{ bus: MessageBus; deadLetters(): DeadLetter[]; teardown(): Promise<void> }>;
  teardown(): Promise<void>;
}

const tracing = installInMemoryTracing();

const now = () => new Date().toISOString();
const stepCompleted = (jobId: string, step: number) =>
  createMessage('TrainingStepCompleted', { step, batchId: `b${step}`, durationMs: 10 }, { jobId, source: 'contract-test', occurredAt: now() });

function message<T extends MessageType>(type: T, data: DataOf<T>, jobId: string) {
  return createMessage(type, data, { jobId, source: 'contract-test', occurredAt: now() });
}

export function describeBusContract(adapter: string, makeFixture: () => Promise<BusContractFixture>): void {
  describe(`bus contract: ${adapter}`, () => {
    let f: BusContractFixture;
    const open: Subscription[] = [];
    beforeAll(async () => {
      f = await makeFixture();
      await f.store.transaction((m) => m.query(`CREATE TABLE IF NOT EXISTS contract_counts (event_id UUID PRIMARY KEY, handled INTEGER NOT NULL)`));
    });
    afterEach(async () => {
      await Promise.all(open.splice(0).map((s) => s.close()));
    });
    afterAll(async () => {
      await f?.teardown();
    });

    /** Dead letters the bus counted (metrics) for a topic and reason; the suite shares one bus, so tests compare before and after. */
    const counted = (topic: string, reason: 'invalid' | 'handler-failed') =>
      f.bus.deadLetterCounts().find((c) => c.topic === topic && c.reason === reason)?.count ?? 0;

    const subscribe = async (opts: Parameters<MessageBus['subscribe']>[0]) => {
      const s = await f.bus.subscribe(opts);
      open.push(s);
      return s;
    };

    it('keeps per-key order across a consumer restart', async () => {
      const jobs = [`job-${randomUUID()}`, `job-${randomUUID()}`];
      const groupId = `order-${randomUUID()}`;
      const seen = new Map<string, number[]>(jobs.map((j) => [j, []]));
      const handler = async (d: Delivery) => {
        if (d.message.type === 'TrainingStepCompleted' && seen.has(d.message.jobId)) seen.get(d.message.jobId)!.push(d.message.data.step);
      };
      const total = () => [...seen.values()].reduce((n, s) => n + s.length, 0);

      for (let i = 0; i < 40; i++) await f.bus.publish(jobs.map((j) => stepCompleted(j, i)));
      const first = await subscribe({ groupId, topics: [Topics.training], handler });
      await eventually('a first share of the records', () => (total() >= 20 ? true : undefined));
      await first.close(); // the restart: a graceful stop commits what was handled
      open.splice(open.indexOf(first), 1);

      for (let i = 40; i < 80; i++) await f.bus.publish(jobs.map((j) => stepCompleted(j, i)));
      await subscribe({ groupId, topics: [Topics.training], handler });
      await eventually('all records after the restart', () => (total() >= 160 ? true : undefined));

      const expected = Array.from({ length: 80 }, (_, i) => i);
      for (const j of jobs) expect(seen.get(j)).toEqual(expected);
    });

    it('dead-letters invalid records with their reason and handles the next valid one', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `dlq-${randomUUID()}`;
      const notJson = Buffer.from('{"type":"TrainingStepCompleted", this is not json');
      const wrongShape = JSON.stringify({ ...stepCompleted(jobId, 1), data: { step: -5 } });
      const countedBefore = counted(Topics.training, 'invalid');
      await f.bus.publishRaw({ topic: Topics.training, key: jobId, value: notJson });
      await f.bus.publishRaw({ topic: Topics.training, key: jobId, value: wrongShape });
      await f.bus.publish(stepCompleted(jobId, 2));

      const handled: RobustrlMessage[] = [];
      await subscribe({
        groupId,
        topics: [Topics.training],
        handler: async (d) => void (d.message.jobId === jobId && handled.push(d.message)),
      });
      await eventually('the valid record after the invalid ones', () => (handled.length === 1 ? true : undefined));
      expect(handled[0]).toMatchObject({ type: 'TrainingStepCompleted', data: { step: 2 } });

      const mine = await eventually('two dead letters of this group', () => {
        const dl = f.deadLetters().filter((d) => d.consumerGroup === groupId && d.key === jobId);
        return dl.length === 2 ? dl : undefined;
      });
      const byOffset = mine.sort((a, b) => Number(a.originalOffset) - Number(b.originalOffset));
      expect(byOffset[0]).toMatchObject({ kind: 'invalid', originalTopic: Topics.training });
      expect(byOffset[0].reason).toMatch(/not JSON/);
      expect(byOffset[0].value).toEqual(notJson);
      expect(byOffset[1].reason).toMatch(/invalid TrainingStepCompleted/);
      expect(byOffset[1].reason).toMatch(/data\.batchId|data\.step/);
      expect(byOffset[1].value?.toString()).toEqual(wrongShape);
      await eventually('both counted as invalid on the training topic', () => (counted(Topics.training, 'invalid') === countedBefore + 2 ? true : undefined));
    });

    it('with an identity: signs what it publishes; what its verifier refuses is dead-lettered as unauthenticated, and the partition moves on', async () => {
      const secret = `contract-identity-secret-${randomUUID()}`;
      // An agent's signer (machine m-1) on a bus that checks as the control plane does: one bus plays both sides.
      const peer = await f.withIdentity({ signer: new MachineSigner('m-1', machineKeyOf(secret, 'm-1')), verifier: new ControlPlaneVerifier(secret) });
      try {
        const jobId = `job-${randomUUID()}`;
        const groupId = `identity-${randomUUID()}`;
        const sample = (machineId: string, source: string, tensorActive: number) =>
          createMessage(
            'GpuActivitySampled',
            { machineId, sampledAt: now(), intervalSeconds: 10, tensorActive, source: 'emulated' },
            { jobId, source, occurredAt: now() },
          );
        await peer.bus.publish(sample('m-1', 'agent/m-1', 0.1)); // honest
        await peer.bus.publish(sample('m-2', 'agent/m-1', 0.2)); // m-1 reporting for m-2
        await peer.bus.publish(sample('m-2', 'agent/m-2', 0.3)); // m-1 posing as m-2
        await peer.bus.publishRaw({ topic: Topics.telemetry, key: jobId, value: JSON.stringify(sample('m-1', 'agent/m-1', 0.4)) }); // unsigned
        const forged = JSON.stringify(sample('m-1', 'agent/m-1', 0.5));
        await peer.bus.publishRaw({
          topic: Topics.telemetry,
          key: jobId,
          value: forged,
          headers: { [IdentityHeaders.signer]: 'machine:m-1', [IdentityHeaders.signature]: 'bm90IGEgc2lnbmF0dXJl' },
        });
        await peer.bus.publish(sample('m-1', 'agent/m-1', 0.6)); // honest again, after them

        const handled: Delivery[] = [];
        const s = await peer.bus.subscribe({ groupId, topics: [Topics.telemetry], handler: async (d) => void (d.message.jobId === jobId && handled.push(d)) });
        try {
          await eventually('both honest samples', () => (handled.length === 2 ? true : undefined));
          const refused = await eventually('four dead letters', () => {
            const dl = peer.deadLetters().filter((d) => d.consumerGroup === groupId && d.key === jobId);
            return dl.length === 4 ? dl.sort((a, b) => Number(a.originalOffset) - Number(b.originalOffset)) : undefined;
          });
          expect(handled.map((d) => (d.message.type === 'GpuActivitySampled' ? d.message.data.tensorActive : null))).toEqual([0.1, 0.6]);
          expect(handled[0].headers[IdentityHeaders.signer]).toBe('machine:m-1');
          expect(refused.map((d) => d.kind)).toEqual(['unauthenticated', 'unauthenticated', 'unauthenticated', 'unauthenticated']);
          expect(refused[0].reason).toMatch(/signed by machine:m-1 but speaks for machine 'm-2'/);
          expect(refused[1].reason).toMatch(/signed by machine:m-1 but sent as 'agent\/m-2'/);
          expect(refused[2].reason).toMatch(/unsigned record/);
          expect(refused[3].reason).toMatch(/the signature does not hold for machine:m-1/);
          expect(refused[3].value?.toString()).toBe(forged);
        } finally {
          await s.close();
        }
      } finally {
        await peer.teardown();
      }
    });

    it('accepts a message type only on its catalog topic: one on another topic is dead-lettered, not handled', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `topic-${randomUUID()}`;
      const verdict = message(
        'FaultConfirmed',
        {
          verdictId: 'v-1',
          machineId: 'trainer-0',
          role: 'trainer',
          rule: 'explicit-signal',
          handledAs: 'trainer',
          machineFaulty: false,
          detectionLatencyMs: 0,
          evidence: {},
        },
        jobId,
      );
      // A valid verdict, written where only telemetry belongs, then a valid telemetry sample.
      await f.bus.publishRaw({ topic: Topics.telemetry, key: jobId, value: JSON.stringify(verdict) });
      await f.bus.publish(
        message('GpuActivitySampled', { machineId: 'trainer-0', sampledAt: now(), intervalSeconds: 10, tensorActive: 0.5, source: 'emulated' }, jobId),
      );

      const handled: RobustrlMessage[] = [];
      await subscribe({ groupId, topics: [Topics.telemetry], handler: async (d) => void (d.message.jobId === jobId && handled.push(d.message)) });
      await eventually('the telemetry sample after the misplaced verdict', () => (handled.length === 1 ? true : undefined));
      expect(handled.map((m) => m.type)).toEqual(['GpuActivitySampled']);
      const dl = await eventually('the misplaced verdict dead-lettered', () => f.deadLetters().find((d) => d.consumerGroup === groupId && d.key === jobId));
      expect(dl).toMatchObject({ kind: 'invalid', originalTopic: Topics.telemetry });
      expect(dl.reason).toMatch(/FaultConfirmed belongs on robustrl\.verdicts, not on robustrl\.telemetry/);
    });

    it('dead-letters a record at the bus limit as one reference (topic, partition, offset, size, prefix) and handles the next', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `big-${randomUUID()}`;
      // Not JSON, and as large as the bus takes: a copy with the dead-letter headers would not fit.
      const big = Buffer.alloc(f.bus.maxRecordBytes - 4_096 - Buffer.byteLength(jobId), 'x');
      await f.bus.publishRaw({ topic: Topics.training, key: jobId, value: big });
      await f.bus.publish(stepCompleted(jobId, 1));

      const handled: RobustrlMessage[] = [];
      await subscribe({ groupId, topics: [Topics.training], handler: async (d) => void (d.message.jobId === jobId && handled.push(d.message)) });
      await eventually('the record after the oversized one', () => (handled.length === 1 ? true : undefined));
      const dl = await eventually('the oversized record dead-lettered', () => f.deadLetters().find((d) => d.consumerGroup === groupId && d.key === jobId));
      expect(dl).toMatchObject({ kind: 'invalid', reference: true, originalTopic: Topics.training, originalSizeBytes: big.length });
      const ref = JSON.parse(dl.value!.toString()) as DeadLetterReference;
      expect(ref).toMatchObject({ topic: Topics.training, offset: dl.originalOffset, partition: dl.originalPartition, sizeBytes: big.length });
      expect(ref.reason).toMatch(/not JSON/);
      expect(ref.prefix).toBe('x'.repeat(2_048));
      expect(f.deadLetters().filter((d) => d.consumerGroup === groupId && d.key === jobId)).toHaveLength(1);
    });

    it('dead-letters a bad record once, however many consumer groups read it and however often they restart', async () => {
      const jobId = `job-${randomUUID()}`;
      const countedBefore = counted(Topics.training, 'invalid');
      await f.bus.publishRaw({ topic: Topics.training, key: jobId, value: 'not json at all' });
      await f.bus.publish(stepCompleted(jobId, 1));
      const groups = [`once-a-${randomUUID()}`, `once-b-${randomUUID()}`];
      const seen = new Map<string, number>();
      const readAll = async (groupId: string) => {
        const sub = await f.bus.subscribe({
          groupId,
          topics: [Topics.training],
          handler: async (d) => void (d.message.jobId === jobId && seen.set(groupId, (seen.get(groupId) ?? 0) + 1)),
        });
        await eventually(`${groupId} past the bad record`, () => (seen.get(groupId) === 1 ? true : undefined));
        await sub.close();
      };
      // Two groups read it; then a fresh group, as a read model joining anew on every start does.
      for (const g of groups) await readAll(g);
      await readAll(`once-c-${randomUUID()}`);
      const mine = await eventually('the dead letter', () => {
        const dl = f.deadLetters().filter((d) => d.key === jobId);
        return dl.length > 0 ? dl : undefined;
      });
      expect(mine).toHaveLength(1);
      expect(mine[0].consumerGroup).toBe(groups[0]);
      // Counted once too: the groups that found it claimed wrote nothing.
      await eventually('the dead letter counted', () => (counted(Topics.training, 'invalid') > countedBefore ? true : undefined));
      expect(counted(Topics.training, 'invalid')).toBe(countedBefore + 1);
    });

    it('retries a failing handler, then dead-letters the record and moves on', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `poison-${randomUUID()}`;
      const countedBefore = counted(Topics.training, 'handler-failed');
      await f.bus.publish([stepCompleted(jobId, 1), stepCompleted(jobId, 2)]);
      const attempts: number[] = [];
      const handled: number[] = [];
      await subscribe({
        groupId,
        topics: [Topics.training],
        retry: { maxAttempts: 3, initialBackoffMs: 5, maxBackoffMs: 20 },
        handler: async (d) => {
          if (d.message.jobId !== jobId || d.message.type !== 'TrainingStepCompleted') return;
          if (d.message.data.step === 1) {
            attempts.push(d.attempt);
            throw new Error('downstream unavailable');
          }
          handled.push(d.message.data.step);
        },
      });
      await eventually('the record after the poison one', () => (handled.length === 1 ? true : undefined));
      expect(attempts).toEqual([1, 2, 3]);
      const dl = await eventually('the poison record dead-lettered', () => f.deadLetters().find((d) => d.consumerGroup === groupId && d.key === jobId));
      expect(dl.kind).toBe('handler-failed');
      expect(dl.reason).toMatch(/after 3 attempt\(s\): Error: downstream unavailable/);
      await eventually('counted as handler-failed', () => (counted(Topics.training, 'handler-failed') === countedBefore + 1 ? true : undefined));
    });

    it('waits out an unavailable dependency without limit: the record is handled when it returns, never dead-lettered', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `outage-${randomUUID()}`;
      await f.bus.publish([stepCompleted(jobId, 1), stepCompleted(jobId, 2)]);
      const attempts: number[] = [];
      const handled: number[] = [];
      // The store refuses connections for longer than the retry budget (3 attempts), then comes back.
      const outageAttempts = 8;
      const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      await subscribe({
        groupId,
        topics: [Topics.training],
        retry: { maxAttempts: 3, initialBackoffMs: 5, maxBackoffMs: 20 },
        handler: async (d) => {
          if (d.message.jobId !== jobId || d.message.type !== 'TrainingStepCompleted') return;
          if (d.message.data.step === 1 && attempts.length < outageAttempts) {
            attempts.push(d.attempt);
            throw refused();
          }
          handled.push(d.message.data.step);
        },
      });
      await eventually('both records, in order, after the outage', () => (handled.length === 2 ? true : undefined));
      expect(handled).toEqual([1, 2]);
      expect(attempts).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect(f.deadLetters().filter((d) => d.consumerGroup === groupId && d.key === jobId)).toEqual([]);
    });

    it('hands batches of one partition in order; a batch failing on its own is split and only its bad record dead-lettered', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `batch-${randomUUID()}`;
      await f.bus.publish(Array.from({ length: 30 }, (_, i) => stepCompleted(jobId, i)));
      await f.bus.publishRaw({ topic: Topics.training, key: jobId, value: '{"not":"a message"}' });
      await f.bus.publish(Array.from({ length: 10 }, (_, i) => stepCompleted(jobId, 30 + i)));
      const handled: number[] = [];
      const batchSizes: number[] = [];
      const poisonAttempts: number[] = [];
      await subscribe({
        groupId,
        topics: [Topics.training],
        retry: { maxAttempts: 2, initialBackoffMs: 5, maxBackoffMs: 20 },
        maxBatchSize: 16,
        batchHandler: async (batch) => {
          const mine = batch.deliveries.filter((d) => d.message.jobId === jobId && d.message.type === 'TrainingStepCompleted');
          if (mine.length === 0) return;
          expect(new Set(batch.deliveries.map((d) => `${d.topic}/${d.partition}`))).toEqual(new Set([`${batch.topic}/${batch.partition}`]));
          const steps = mine.map((d) => (d.message as ReturnType<typeof stepCompleted>).data.step);
          if (steps.includes(7)) {
            poisonAttempts.push(batch.attempt);
            throw new Error('step 7 cannot be handled');
          }
          batchSizes.push(batch.deliveries.length);
          handled.push(...steps);
        },
      });
      await eventually('every record but the poison one', () => (handled.length === 39 ? true : undefined));
      expect(handled).toEqual(Array.from({ length: 40 }, (_, i) => i).filter((i) => i !== 7));
      expect(Math.max(...batchSizes)).toBeGreaterThan(1);
      expect(Math.max(...batchSizes)).toBeLessThanOrEqual(16);
      // Twice as a batch, then twice alone (the split): then dead-lettered with its reason, the rest handled.
      expect(poisonAttempts).toEqual([1, 2, 1, 2]);
      const dls = await eventually('the invalid record and the poison record dead-lettered', () => {
        const mine = f.deadLetters().filter((d) => d.consumerGroup === groupId && d.key === jobId);
        return mine.length === 2 ? mine : undefined;
      });
      expect(dls.map((d) => d.kind).sort()).toEqual(['handler-failed', 'invalid']);
      expect(dls.find((d) => d.kind === 'handler-failed')!.reason).toMatch(/step 7 cannot be handled/);
    });

    it('a group given some partitions consumes those only, and its lag counts those only', async () => {
      const jobs = Array.from({ length: 24 }, () => `job-${randomUUID()}`);
      const even = `shard-even-${randomUUID()}`;
      const odd = `shard-odd-${randomUUID()}`;
      await f.bus.publish(jobs.flatMap((j) => [0, 1, 2].map((i) => stepCompleted(j, i))));
      const mine = new Set(jobs);
      const seen = new Map<string, Array<{ step: number; partition: number }>>([
        [even, []],
        [odd, []],
      ]);
      const track = (groupId: string) => (d: Delivery) => {
        if (d.message.type === 'TrainingStepCompleted' && mine.has(d.message.jobId))
          seen.get(groupId)!.push({ step: d.message.data.step, partition: d.partition });
      };
      await subscribe({
        groupId: even,
        topics: [Topics.training],
        partitions: (p) => p % 2 === 0,
        batchHandler: async (batch) => batch.deliveries.forEach(track(even)),
      });
      await subscribe({ groupId: odd, topics: [Topics.training], partitions: (p) => p % 2 === 1, handler: async (d) => track(odd)(d) });
      await eventually('every record, each by one of the two groups', () => (seen.get(even)!.length + seen.get(odd)!.length >= 72 ? true : undefined));
      expect(seen.get(even)!.every((d) => d.partition % 2 === 0)).toBe(true);
      expect(seen.get(odd)!.every((d) => d.partition % 2 === 1)).toBe(true);
      // 24 jobs over the topic's partitions: both shards have some (else the split would prove nothing).
      expect(seen.get(even)!.length).toBeGreaterThan(0);
      expect(seen.get(odd)!.length).toBeGreaterThan(0);
      expect(seen.get(even)!.length + seen.get(odd)!.length).toBe(72);
      // Caught up on their own partitions: neither counts the other's records as its lag.
      await eventually('both groups report no lag', async () => {
        const health = await f.bus.health();
        const lags = [even, odd].map((g) => health.subscriptions.find((s) => s.groupId === g)?.lag);
        return lags.every((l) => l === 0) ? true : undefined;
      });
    });

    it('publishes a list larger than one broker request takes, in order', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `bulk-${randomUUID()}`;
      // 3,000 records of about 1 kB: three times what a broker takes in one record batch.
      const pad = 'x'.repeat(900);
      const messages = Array.from({ length: 3_000 }, (_, i) =>
        createMessage('TrainingStepCompleted', { step: i, batchId: `b${i}-${pad}`, durationMs: 1 }, { jobId, source: 'contract-test', occurredAt: now() }),
      );
      await f.bus.publish(messages);
      const steps: number[] = [];
      await subscribe({
        groupId,
        topics: [Topics.training],
        batchHandler: async (batch) => {
          for (const d of batch.deliveries) if (d.message.jobId === jobId && d.message.type === 'TrainingStepCompleted') steps.push(d.message.data.step);
        },
      });
      await eventually('all 3,000 records', () => (steps.length === 3_000 ? true : undefined), 60_000);
      expect(steps).toEqual(Array.from({ length: 3_000 }, (_, i) => i));
    });

    it('with acknowledged commits, a new subscription of the group resumes at the last acknowledgement, not at what was handled', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `ack-${randomUUID()}`;
      await f.bus.publish(Array.from({ length: 20 }, (_, i) => stepCompleted(jobId, i)));
      const seen: number[] = [];
      let acknowledgeAt: { topic: string; partition: number; nextOffset: string } | null = null;
      const first = await subscribe({
        groupId,
        topics: [Topics.training],
        commit: 'acknowledged',
        batchHandler: async (batch) => {
          for (const d of batch.deliveries) {
            if (d.message.jobId !== jobId || d.message.type !== 'TrainingStepCompleted') continue;
            seen.push(d.message.data.step);
            if (d.message.data.step === 9) acknowledgeAt = { topic: d.topic, partition: d.partition, nextOffset: String(BigInt(d.offset) + 1n) };
          }
        },
      });
      await eventually('all 20 handled once', () => (seen.length === 20 ? true : undefined));
      await first.acknowledge([acknowledgeAt!]);
      // Handled records are not handed again while the subscription runs.
      await new Promise((r) => setTimeout(r, 300));
      expect(seen).toHaveLength(20);
      await first.close();
      open.splice(open.indexOf(first), 1);
      seen.length = 0;
      await subscribe({
        groupId,
        topics: [Topics.training],
        commit: 'acknowledged',
        batchHandler: async (batch) => {
          for (const d of batch.deliveries) if (d.message.jobId === jobId && d.message.type === 'TrainingStepCompleted') seen.push(d.message.data.step);
        },
      });
      await eventually('the records after the acknowledgement again', () => (seen.length >= 10 ? true : undefined));
      expect(seen).toEqual(Array.from({ length: 10 }, (_, i) => 10 + i));
    });

    it('redelivers after a crash between effect and commit, and the checkpoint keeps the effect single', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `once-${randomUUID()}`;
      const event = stepCompleted(jobId, 7);
      await f.bus.publish(event);
      const outcomes: string[] = [];
      await subscribe({
        groupId,
        topics: [Topics.training],
        retry: { maxAttempts: 5, initialBackoffMs: 5, maxBackoffMs: 20 },
        handler: async (d) => {
          if (d.message.eventId !== event.eventId) return;
          outcomes.push(
            await f.store.applyOnce(groupId, d, (m) =>
              m.query(
                `INSERT INTO contract_counts (event_id, handled) VALUES ($1, 1)
                 ON CONFLICT (event_id) DO UPDATE SET handled = contract_counts.handled + 1`,
                [d.message.eventId],
              ),
            ),
          );
          // The effect and checkpoint are committed; dying now means the offset is never committed.
          if (d.attempt === 1) throw new Error('simulated crash after the effect, before the commit');
        },
      });
      await eventually('the redelivery', () => (outcomes.length >= 2 ? true : undefined));
      expect(outcomes.slice(0, 2)).toEqual(['applied', 'duplicate']);
      const rows: Array<{ handled: number }> = await f.store.dataSource.query(`SELECT handled FROM contract_counts WHERE event_id = $1`, [event.eventId]);
      expect(rows).toEqual([{ handled: 1 }]);
    });

    it('carries one trace from producer to consumer to the downstream publish', async () => {
      const jobId = `job-${randomUUID()}`;
      const groupId = `trace-${randomUUID()}`;
      tracing.reset();
      const cause = message(
        'AgentFaultSignalled',
        {
          machineId: 'gpu-3',
          role: 'trainer',
          signal: 'xid-error',
          detail: 'Xid 79',
          exitCode: null,
          observedAt: now(),
        },
        jobId,
      );
      let downstream: RobustrlMessage | undefined;
      await subscribe({
        groupId: `${groupId}-detector`,
        topics: [Topics.heartbeat],
        handler: async (d) => {
          if (d.message.eventId !== cause.eventId) return;
          await f.bus.publish(
            createCausedMessage(
              'FaultConfirmed',
              {
                verdictId: 'v1',
                machineId: 'gpu-3',
                role: 'trainer',
                rule: 'explicit-signal',
                evidence: { signal: 'xid-error' },
                handledAs: 'trainer',
                machineFaulty: true,
                detectionLatencyMs: 3,
              },
              d.message,
              { source: 'contract-test', occurredAt: now() },
            ),
          );
        },
      });
      await subscribe({
        groupId: `${groupId}-controller`,
        topics: [Topics.verdicts],
        handler: async (d) => void (d.message.causationId === cause.eventId && (downstream = d.message)),
      });
      await f.bus.publish(cause);
      const confirmed = await eventually('the downstream verdict', () => downstream);

      const spans = await eventually('four finished spans of this trace', () => {
        const sendCause = tracing.spans().find((s) => s.name === 'send AgentFaultSignalled' && s.attributes['robustrl.job_id'] === jobId);
        if (!sendCause) return undefined;
        const traceId = sendCause.spanContext().traceId;
        const inTrace = tracing.spans().filter((s) => s.spanContext().traceId === traceId);
        return inTrace.length >= 4 ? inTrace : undefined;
      });
      const byName = (name: string) => spans.find((s) => s.name === name)!;
      const chain = ['send AgentFaultSignalled', 'process AgentFaultSignalled', 'send FaultConfirmed', 'process FaultConfirmed'].map(byName);
      for (const s of chain) expect(s).toBeDefined();
      for (let i = 1; i < chain.length; i++) {
        expect(chain[i].parentSpanContext?.spanId).toBe(chain[i - 1].spanContext().spanId);
      }
      // The trace context also rides in the envelope, so the event log keeps it.
      expect(confirmed.trace?.traceparent).toContain(chain[0].spanContext().traceId);
    });
  });
}
