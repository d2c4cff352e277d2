import { SERVICE_ROLES, ServiceRole, TOPIC_RIGHTS } from '@robustrl/bus';
import { DEAD_LETTER_TOPIC, MessageType, topicOf, TopicName } from '@robustrl/contracts';
import { AGENT_OUTPUT_TYPES } from '@robustrl/agent';
import { CONTROLLER_INPUTS, DepartureRelay, RecoveryExecutor } from '@robustrl/controller';
import { CONTROLLER_OUTPUT_TYPES } from '@robustrl/controller-domain';
import { DETECTOR_INPUTS } from '@robustrl/detector';
import { DETECTOR_HOST_INPUT_TYPES, DETECTOR_OUTPUT_TYPES } from '@robustrl/detector-domain';
import { ETTR_INPUT_TYPES } from '@robustrl/ettr';
import { REQUEST_MANAGER_INPUTS, TRAJECTORY_STORE_OUTPUT_TYPES } from '@robustrl/request-manager';
import { PoolScaler, ROLLOUT_MANAGER_INPUTS, ROUTER_OUTPUT_TYPES } from '@robustrl/rollout-manager';
import { ROLLOUT_POOL_OUTPUT_TYPES } from '@robustrl/rollout-manager-domain';
import { WEIGHT_REGISTRY_INPUTS } from '@robustrl/weight-registry';
import { WEIGHT_REGISTRY_OUTPUT_TYPES } from '@robustrl/weight-registry-domain';

/**
 * The broker's ACLs (libs/bus/src/kafka/topic-acls.ts) against what the code does: each service reads
 * exactly the topics it subscribes to, and writes exactly the topics of the types it can emit (its
 * decider's outputs and its shell's: executors, the router, the trajectory store, the detector's own
 * blind spots) plus dead letters. A right missing here would fail in production as an authorization
 * error; a right too many is one a compromised service should not have.
 */
const topicsOf = (types: readonly MessageType[]): TopicName[] => types.map((t) => topicOf(t));
const sorted = (topics: Iterable<string>) => [...new Set(topics)].sort();

const CODE: Record<ServiceRole | 'agent', { reads: readonly string[]; emits: readonly MessageType[] }> = {
  detector: { reads: DETECTOR_INPUTS, emits: [...DETECTOR_OUTPUT_TYPES, ...DETECTOR_HOST_INPUT_TYPES] },
  controller: {
    // The deciding consumer, the ETTR projection, the orchestrator executor, the platform's departure notices.
    reads: [...CONTROLLER_INPUTS, ...topicsOf(ETTR_INPUT_TYPES), ...RecoveryExecutor.INPUT_TOPICS],
    emits: [...CONTROLLER_OUTPUT_TYPES, ...RecoveryExecutor.OUTPUT_TYPES, ...DepartureRelay.OUTPUT_TYPES],
  },
  'request-manager': { reads: REQUEST_MANAGER_INPUTS, emits: TRAJECTORY_STORE_OUTPUT_TYPES },
  'rollout-manager': {
    reads: [...ROLLOUT_MANAGER_INPUTS, ...PoolScaler.INPUT_TOPICS],
    emits: [...ROLLOUT_POOL_OUTPUT_TYPES, ...PoolScaler.OUTPUT_TYPES, ...ROUTER_OUTPUT_TYPES],
  },
  'weight-registry': { reads: WEIGHT_REGISTRY_INPUTS, emits: WEIGHT_REGISTRY_OUTPUT_TYPES },
  // Its command loop (control, heartbeat probes) and its weight plane (manifests and assignments).
  // Commands and probes, weights, and the membership a trainer's first launch forms its group from (first-launch.ts).
  agent: { reads: ['robustrl.control', 'robustrl.heartbeat', 'robustrl.weights', 'robustrl.membership'], emits: AGENT_OUTPUT_TYPES },
};

describe('topic rights match what each client reads and emits', () => {
  it.each([...SERVICE_ROLES, 'agent' as const])('%s: reads its subscriptions, writes the topics of its outputs and dead letters', (role) => {
    const code = CODE[role];
    expect(sorted(TOPIC_RIGHTS[role].read)).toEqual(sorted(code.reads));
    expect(sorted(TOPIC_RIGHTS[role].write)).toEqual(sorted([...topicsOf(code.emits), DEAD_LETTER_TOPIC]));
  });

  it('commands and verdicts: only the controller (and an operator scaling the pool, and the scaler answering) writes control; only the detector writes verdicts', () => {
    const writers = (topic: string) =>
      Object.entries(TOPIC_RIGHTS)
        .filter(([, r]) => r.write.includes(topic as never))
        .map(([role]) => role)
        .sort();
    expect(writers('robustrl.control')).toEqual(['controller', 'operator', 'rollout-manager']);
    expect(writers('robustrl.verdicts')).toEqual(['detector']);
  });
});
