import { AclOperationTypes, AclPermissionTypes, AclResourceTypes, Kafka, logLevel, ResourcePatternTypes, SASLOptions } from 'kafkajs';
import { AclEntry } from './topic-acls';

/** How to reach the brokers: their addresses, and TLS and a login (kafkaSecurityFromEnv) where they ask for them. */
export interface KafkaConnection {
  brokers: string[];
  security?: { ssl?: { ca?: string }; sasl?: { mechanism: string; username: string; password: string } };
}

/** A kafkajs client for an operator's tool (ACLs, `robustrl tail`): its own log off, TLS and the login as given. */
export function kafkaClientOf(connection: KafkaConnection, clientId: string): Kafka {
  const { ssl, sasl } = connection.security ?? {};
  return new Kafka({
    clientId,
    brokers: connection.brokers,
    logLevel: logLevel.NOTHING,
    ...(ssl ? { ssl: ssl.ca ? { ca: [ssl.ca] } : true } : {}),
    ...(sasl ? { sasl: sasl as SASLOptions } : {}),
  });
}

const OPERATION = { read: AclOperationTypes.READ, write: AclOperationTypes.WRITE, describe: AclOperationTypes.DESCRIBE, create: AclOperationTypes.CREATE };

/** Kafka's name for a SCRAM or PLAIN login: `User:<name>`. */
export function kafkaPrincipal(username: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(username)) throw new Error(`a principal is letters, digits, '.', '_' or '-', got '${username}'`);
  return `User:${username}`;
}

/**
 * Allow `acls` to `principal` on the brokers (CreateAcls), as their administrator (a login with the
 * right to alter ACLs). Creating an ACL that exists changes nothing,
 * so granting a role twice is harmless. Rights are only ever added: a role that lost a right keeps it on
 * the broker until an operator deletes it (`kafka-acls.sh --remove`), a narrowing no tool should do
 * behind the operator's back.
 */
export async function grantAcls(connection: KafkaConnection, principal: string, acls: readonly AclEntry[]): Promise<void> {
  const admin = kafkaClientOf(connection, 'robustrl-acls').admin();
  await admin.connect();
  try {
    await admin.createAcls({
      acl: acls.map((e) => ({
        resourceType: e.resource === 'topic' ? AclResourceTypes.TOPIC : AclResourceTypes.GROUP,
        resourceName: e.name,
        resourcePatternType: e.pattern === 'literal' ? ResourcePatternTypes.LITERAL : ResourcePatternTypes.PREFIXED,
        principal,
        host: '*',
        operation: OPERATION[e.operation],
        permissionType: AclPermissionTypes.ALLOW,
      })),
    });
  } finally {
    await admin.disconnect();
  }
}
