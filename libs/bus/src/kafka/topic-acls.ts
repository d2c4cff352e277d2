import { ALL_TOPICS, DEAD_LETTER_TOPIC, Topics } from '@robustrl/contracts';

/** Who a broker login belongs to: a control-plane service, or the agent of a GPU machine. */
export type ClientRole = 'service' | 'agent';

/** One Kafka ACL (allow) for a principal: an operation on a literal or prefixed resource name. */
export interface AclEntry {
  resource: 'topic' | 'group';
  pattern: 'literal' | 'prefixed';
  name: string;
  operation: 'read' | 'write' | 'describe' | 'create';
}

/**
 * What each role may do on which topic: the broker enforces it (README "Kafka: TLS, logins and ACLs").
 * Agents write their own reports and answers and read what addresses machines; they cannot write a
 * command, a verdict or a trajectory, whatever they sign. Control-plane services read and write every
 * topic (they share the identity secret, so narrower rights among them would not stop one of them).
 */
export const TOPIC_RIGHTS: Readonly<Record<ClientRole, { read: readonly string[]; write: readonly string[] }>> = {
  service: { read: [...ALL_TOPICS, DEAD_LETTER_TOPIC], write: [...ALL_TOPICS, DEAD_LETTER_TOPIC] },
  agent: {
    // Commands and probes for its machine, weight manifests and pull assignments.
    read: [Topics.control, Topics.heartbeat, Topics.weights],
    // Registrations, samples, phases, faults, steps and checkpoints, weight publications and pull
    // outcomes, command answers; and the dead letters of what it could not handle.
    write: [Topics.membership, Topics.telemetry, Topics.heartbeat, Topics.training, Topics.weights, Topics.replies, DEAD_LETTER_TOPIC],
  },
};

/** Consumer groups by role: an agent's are `robustrl-agent-<machine>…`; a service may use any of the deployment's. */
const GROUP_PREFIX: Readonly<Record<ClientRole, string>> = { service: '', agent: 'robustrl-agent-' };

/**
 * The ACLs of a role in a deployment whose topics and groups carry `topicPrefix` (ROBUSTRL_TOPIC_PREFIX).
 * Every role may describe every robustrl topic (the bus checks they exist at start; metadata tells
 * nothing about records); only services may create them.
 */
export function aclsFor(role: ClientRole, topicPrefix = ''): AclEntry[] {
  const rights = TOPIC_RIGHTS[role];
  const topic = (name: string, operation: AclEntry['operation']): AclEntry => ({ resource: 'topic', pattern: 'literal', name: topicPrefix + name, operation });
  return [
    { resource: 'topic', pattern: 'prefixed', name: `${topicPrefix}robustrl.`, operation: 'describe' },
    ...(role === 'service' ? [{ resource: 'topic', pattern: 'prefixed', name: `${topicPrefix}robustrl.`, operation: 'create' } as AclEntry] : []),
    ...rights.read.map((t) => topic(t, 'read')),
    ...rights.write.map((t) => topic(t, 'write')),
    groupsOf(topicPrefix + GROUP_PREFIX[role]),
  ];
}

/** Groups starting with a prefix; with none, every group (Kafka's literal `*`: an empty prefix is no name). */
function groupsOf(prefix: string): AclEntry {
  return prefix
    ? { resource: 'group', pattern: 'prefixed', name: prefix, operation: 'read' }
    : { resource: 'group', pattern: 'literal', name: '*', operation: 'read' };
}
