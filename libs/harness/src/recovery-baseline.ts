/**
 * The recovery-latency run's baseline (recovery-latency.ts): the same record through kafkajs alone — a
 * bare round trip, a chain of two bare relays, one bare relay and one durable relay — to set the
 * control plane's path against.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Admin, Kafka, logLevel, Producer } from 'kafkajs';
import { createMessage, encodeMessage, Topics } from '@robustrl/contracts';
import { COMMAND_TIMEOUT_MS } from './recovery-latency-types';

/** A bare route: the topic a trip is sent to, and the trips waiting for their record at its end. */
export interface BareRoute {
  topic: string;
  waiting: Map<string, (at: number) => void>;
}

/** The baseline's producer, the key of its records and its four routes. */
export interface Bare {
  producer: Producer;
  key: string;
  roundTrip: BareRoute;
  chain: BareRoute;
  relay: BareRoute;
  durableRelay: BareRoute;
}

/** Where the baseline registers what it starts, so the run's close() stops it (recovery-latency.ts), and what it needs of the run. */
export interface BaselineOwner {
  topicPrefix: string;
  clients: Array<{ disconnect(): Promise<void> }>;
  relays: ChildProcess[];
  databaseUrl(): string;
}

/**
 * Topics of their own with as many partitions as the control topic (replication as the bus creates
 * them), a producer configured as the bus's (idempotent, one request in flight, acks=all) and
 * consumers polling as the bus's subscriptions do; kafkajs only, nothing of robustrl on the way.
 * Four routes: the round trip (one topic, produce → consume); the relay chain (three topics, two
 * bare-relay.ts processes between them: the recovery path's crossings and processes, nothing decided);
 * one bare relay (two topics, one process: the two crossings the goal allows for); one durable relay
 * (the same, committing a row to the run's PostgreSQL before producing: one crash-safe hop, nothing decided).
 */
export async function startBaseline(owner: BaselineOwner, brokers: string[]): Promise<{ bare: Bare; partitions: number }> {
  const kafka = new Kafka({ brokers, clientId: 'bench-recovery-bare', logLevel: logLevel.NOTHING });
  const admin: Admin = kafka.admin();
  await admin.connect();
  const roundTripTopic = `${owner.topicPrefix}bench.bare`;
  const chainTopics = [0, 1, 2].map((i) => `${owner.topicPrefix}bench.chain.${i}`);
  const relayTopics = [0, 1].map((i) => `${owner.topicPrefix}bench.relay.${i}`);
  const durableTopics = [0, 1].map((i) => `${owner.topicPrefix}bench.durable-relay.${i}`);
  let partitions = 0;
  try {
    const meta = await admin.fetchTopicMetadata({ topics: [owner.topicPrefix + Topics.control] });
    partitions = meta.topics[0].partitions.length;
    await admin.createTopics({
      waitForLeaders: true,
      topics: [roundTripTopic, ...chainTopics, ...relayTopics, ...durableTopics].map((topic) => ({
        topic,
        numPartitions: partitions,
        replicationFactor: -1,
      })),
    });
  } finally {
    await admin.disconnect();
  }
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  owner.clients.push(producer);
  await producer.connect();
  const roundTrip = await bareRoute(owner, kafka, roundTripTopic, roundTripTopic);
  for (let hop = 0; hop < 2; hop++) await startRelay(owner, brokers, chainTopics[hop], chainTopics[hop + 1]);
  const chain = await bareRoute(owner, kafka, chainTopics[0], chainTopics[2]);
  await startRelay(owner, brokers, relayTopics[0], relayTopics[1]);
  const relay = await bareRoute(owner, kafka, relayTopics[0], relayTopics[1]);
  await startRelay(owner, brokers, durableTopics[0], durableTopics[1], owner.databaseUrl());
  const durableRelay = await bareRoute(owner, kafka, durableTopics[0], durableTopics[1]);
  const bare = { producer, key: `bench-bare-${randomUUID().slice(0, 8)}`, roundTrip, chain, relay, durableRelay };
  return { bare, partitions };
}

/** A consumer of `consumeFrom` that resolves the trips sent to `sendTo` as their records arrive. */
async function bareRoute(owner: BaselineOwner, kafka: Kafka, sendTo: string, consumeFrom: string): Promise<BareRoute> {
  const consumer = kafka.consumer({ groupId: `bench-recovery-bare-${randomUUID()}`, maxWaitTimeInMs: 1_000 });
  owner.clients.push(consumer);
  await consumer.connect();
  await consumer.subscribe({ topic: consumeFrom, fromBeginning: true });
  const waiting = new Map<string, (at: number) => void>();
  await consumer.run({
    eachMessage: async ({ message }) => {
      const at = performance.now();
      const id = message.headers?.['bench-id']?.toString();
      if (id) waiting.get(id)?.(at);
    },
  });
  return { topic: sendTo, waiting };
}

/**
 * One bare-relay.ts process from → to, durable when given a database (its stderr goes into the error if
 * it fails); resolves once its consumer joined.
 */
async function startRelay(owner: BaselineOwner, brokers: string[], from: string, to: string, databaseUrl?: string): Promise<void> {
  // The built script, whether this runs built (libs/harness/dist) or from its source (tests).
  const script = resolve(__dirname, '..', 'dist', 'bare-relay.js');
  const child = spawn(process.execPath, [script, brokers.join(','), from, to, ...(databaseUrl ? [databaseUrl] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
  owner.relays.push(child);
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  await new Promise<void>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`bare relay ${from} → ${to} not ready within 60 s: ${stderr}`)), 60_000);
    child.stdout!.on('data', (b: Buffer) => {
      if (b.toString().includes('ready')) {
        clearTimeout(timer);
        done();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`bare relay ${from} → ${to} exited (${code}): ${stderr}`));
    });
  });
}

/**
 * One record (a fault signal's bytes) sent to a route's first topic; ms from the send call to the
 * eachMessage of the consumer at its end.
 */
export async function bareTrip(bare: Bare, route: BareRoute): Promise<number> {
  const { producer, key } = bare;
  const id = randomUUID();
  const value = encodeMessage(
    createMessage(
      'AgentFaultSignalled',
      { machineId: 'rollout-0', role: 'rollout', signal: 'process-exited', detail: 'bare round trip', exitCode: 1, observedAt: new Date().toISOString() },
      { jobId: key, source: 'bench', occurredAt: new Date().toISOString() },
    ),
  );
  let timer: NodeJS.Timeout | undefined;
  const arrived = new Promise<number>((done, fail) => {
    route.waiting.set(id, done);
    timer = setTimeout(() => fail(new Error(`bare trip via ${route.topic}: record not consumed within ${COMMAND_TIMEOUT_MS} ms`)), COMMAND_TIMEOUT_MS);
  });
  const t0 = performance.now();
  await producer.send({ topic: route.topic, acks: -1, messages: [{ key, value, headers: { 'bench-id': id } }] });
  try {
    return (await arrived) - t0;
  } finally {
    clearTimeout(timer);
    route.waiting.delete(id);
  }
}

export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  return exited.finally(() => clearTimeout(timer));
}
