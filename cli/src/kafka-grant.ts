import { AclEntry, aclsFor, CLIENT_ROLES, ClientRole, isClientRole, kafkaPrincipal, SERVICE_ROLES } from '@robustrl/bus';

/** What `robustrl kafka grant` refuses: a usage error, printed with exit code 2. */
export class KafkaGrantUsageError extends Error {}

export interface KafkaGrantArgs {
  role: string;
  /** An agent's machine id (default: the login's name). */
  machine?: string;
  topicPrefix?: string;
}

/** The principal a login is and the ACLs its role gets (libs/bus/src/kafka/topic-acls.ts). */
export function grantOf(username: string, args: KafkaGrantArgs): { principal: string; role: ClientRole; acls: AclEntry[] } {
  if (!isClientRole(args.role)) throw new KafkaGrantUsageError(`--role must be one of ${CLIENT_ROLES.join(', ')}, got '${args.role}'`);
  if (args.machine !== undefined && args.role !== 'agent') throw new KafkaGrantUsageError('--machine is for an agent (--role agent) only');
  let principal: string;
  try {
    principal = kafkaPrincipal(username);
  } catch (e) {
    throw new KafkaGrantUsageError((e as Error).message);
  }
  const machineId = args.role === 'agent' ? (args.machine ?? username) : undefined;
  return { principal, role: args.role, acls: aclsFor(args.role, { topicPrefix: args.topicPrefix ?? '', machineId }) };
}

export type Grant = ReturnType<typeof grantOf>;

/**
 * The logins of a deployment named by convention (deploy/compose, the Helm chart), each after
 * `loginPrefix`: each service's named as the service, the operator's `operator`, and each agent's
 * `agent-<machine>`.
 */
export function standardGrants(agents: readonly string[], options: { topicPrefix?: string; loginPrefix?: string } = {}): Grant[] {
  const { topicPrefix = '', loginPrefix = '' } = options;
  return [
    ...SERVICE_ROLES.map((role) => grantOf(`${loginPrefix}${role}`, { role, topicPrefix })),
    grantOf(`${loginPrefix}operator`, { role: 'operator', topicPrefix }),
    ...agents.map((machine) => grantOf(`${loginPrefix}agent-${machine}`, { role: 'agent', machine, topicPrefix })),
  ];
}

/** One ACL as a line an operator reads (and kafka-acls.sh users recognise). */
export function aclLine(principal: string, acl: AclEntry): string {
  return `${principal} ALLOW ${acl.operation.toUpperCase()} ${acl.resource} ${acl.pattern === 'prefixed' ? `${acl.name}*` : acl.name}`;
}
