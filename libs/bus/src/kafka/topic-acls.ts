import { ALL_TOPICS, DEAD_LETTER_TOPIC, TopicName, Topics } from '@robustrl/contracts';

/** The control-plane services, each of which logs in to the broker as its own principal. */
export const SERVICE_ROLES = ['detector', 'controller', 'request-manager', 'rollout-manager', 'weight-registry'] as const;
export type ServiceRole = (typeof SERVICE_ROLES)[number];

/**
 * Who a broker login belongs to: one control-plane service, the agent of one GPU machine, or an
 * operator (the CLI: `robustrl job start`, `robustrl tail`, scaling the rollout pool).
 */
export type ClientRole = ServiceRole | 'agent' | 'operator';
export const CLIENT_ROLES: readonly ClientRole[] = [...SERVICE_ROLES, 'agent', 'operator'];

export function isClientRole(value: string): value is ClientRole {
  return (CLIENT_ROLES as readonly string[]).includes(value);
}

/** One Kafka ACL (allow) for a principal: an operation on a literal or prefixed resource name. */
export interface AclEntry {
  resource: 'topic' | 'group';
  pattern: 'literal' | 'prefixed';
  name: string;
  operation: 'read' | 'write' | 'describe' | 'create';
}

type TopicOrDeadLetter = TopicName | typeof DEAD_LETTER_TOPIC;
export interface TopicRights {
  /** The topics it subscribes to. */
  read: readonly TopicOrDeadLetter[];
  /** The topics of what it publishes; every role also writes the dead letters of what it could not handle. */
  write: readonly TopicOrDeadLetter[];
}

/**
 * What each role may do on which topic; the broker enforces it (docs/operators/kafka.md).
 * A service reads its inputs and writes its own outputs and nothing else: the request manager cannot
 * write a verdict, the detector cannot write a command. Agents write their own reports and answers and
 * read what addresses machines. Who may say what *within* a topic (a machine only for itself, a
 * command only from the controller) is the identity layer's check (docs/operators/security.md "Who speaks on the bus").
 * test/architecture/topic-rights.spec.ts holds every service to its row: its subscriptions are its
 * reads, and every type it can emit lies on a topic it may write.
 */
export const TOPIC_RIGHTS: Readonly<Record<ClientRole, TopicRights>> = {
  detector: {
    read: [Topics.membership, Topics.telemetry, Topics.heartbeat],
    // Verdicts, and the heartbeat probes it asks agents to answer.
    write: [Topics.verdicts, Topics.heartbeat, DEAD_LETTER_TOPIC],
  },
  controller: {
    read: [Topics.membership, Topics.telemetry, Topics.verdicts, Topics.control, Topics.replies, Topics.training],
    // Decisions and commands; the orchestrator executor's answers; a replaced machine's deregistration
    // and a restarted task's JobStarted; the platform's departure notices, as the agents' are sent
    // (docs/planned-failures.md).
    write: [Topics.control, Topics.replies, Topics.membership, Topics.heartbeat, DEAD_LETTER_TOPIC],
  },
  'request-manager': {
    read: [Topics.trajectories, Topics.training],
    write: [Topics.trajectories, DEAD_LETTER_TOPIC],
  },
  'rollout-manager': {
    read: [Topics.membership, Topics.telemetry, Topics.trajectories, Topics.verdicts, Topics.control, Topics.weights],
    // Reassigned trajectories; the pool scaler's outcomes and the machines it releases; the router's
    // throughput samples.
    write: [Topics.trajectories, Topics.control, Topics.membership, Topics.telemetry, DEAD_LETTER_TOPIC],
  },
  'weight-registry': {
    read: [Topics.membership, Topics.weights, Topics.verdicts, Topics.control],
    write: [Topics.weights, DEAD_LETTER_TOPIC],
  },
  agent: {
    // Commands and probes for its machine, weight manifests and pull assignments, and the job's
    // membership (a trainer's first launch learns its group from it).
    read: [Topics.control, Topics.heartbeat, Topics.weights, Topics.membership],
    // Registrations, samples, phases, faults, steps and checkpoints, weight publications and pull
    // outcomes, command answers.
    write: [Topics.membership, Topics.telemetry, Topics.heartbeat, Topics.training, Topics.weights, Topics.replies, DEAD_LETTER_TOPIC],
  },
  operator: {
    // `robustrl tail` follows everything, dead letters included.
    read: [...ALL_TOPICS, DEAD_LETTER_TOPIC],
    // `robustrl job start` (JobStarted) and a scaling request (ScaleRolloutPool).
    write: [Topics.membership, Topics.control],
  },
};

/**
 * The consumer groups of a role, before the deployment's prefix: a service's are `robustrl-<service>…`
 * (its deciding consumer, executors, projections); an agent's are its machine's only; an operator's are
 * `robustrl tail`'s.
 */
function groupsOf(role: ClientRole, machineId: string | undefined): Array<Pick<AclEntry, 'pattern' | 'name'>> {
  switch (role) {
    case 'agent':
      if (!machineId) throw new Error("an agent's ACLs name its machine: its consumer groups are that machine's only");
      return [
        { pattern: 'literal', name: `robustrl-agent-${machineId}` },
        { pattern: 'prefixed', name: `robustrl-agent-${machineId}-weights-` },
        { pattern: 'prefixed', name: `robustrl-agent-${machineId}-roster-` },
      ];
    case 'operator':
      return [{ pattern: 'prefixed', name: 'robustrl-tail-' }];
    default:
      return [{ pattern: 'prefixed', name: `robustrl-${role}` }];
  }
}

/**
 * The ACLs of a role in a deployment whose topics and groups carry `topicPrefix` (ROBUSTRL_TOPIC_PREFIX);
 * an agent's name its machine. Every role may describe every robustrl topic (the bus checks they exist
 * at start; metadata tells nothing about records); services and operators may create them.
 */
export function aclsFor(role: ClientRole, options: { topicPrefix?: string; machineId?: string } = {}): AclEntry[] {
  const prefix = options.topicPrefix ?? '';
  const rights = TOPIC_RIGHTS[role];
  const topic = (name: string, operation: AclEntry['operation']): AclEntry => ({ resource: 'topic', pattern: 'literal', name: prefix + name, operation });
  return [
    { resource: 'topic', pattern: 'prefixed', name: `${prefix}robustrl.`, operation: 'describe' },
    ...(role === 'agent' ? [] : [{ resource: 'topic', pattern: 'prefixed', name: `${prefix}robustrl.`, operation: 'create' } as AclEntry]),
    ...rights.read.map((t) => topic(t, 'read')),
    ...rights.write.map((t) => topic(t, 'write')),
    ...groupsOf(role, options.machineId).map((g): AclEntry => ({ resource: 'group', ...g, name: prefix + g.name, operation: 'read' })),
  ];
}
