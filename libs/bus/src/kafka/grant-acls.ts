import { AclOperationTypes, AclPermissionTypes, AclResourceTypes, Kafka, logLevel, ResourcePatternTypes, SASLOptions } from 'kafkajs';
import { AclEntry } from './topic-acls';

/** How to reach the brokers as their administrator (a login with the right to alter ACLs). */
export interface KafkaAdminConnection {
  brokers: string[];
  security?: { ssl?: { ca?: string }; sasl?: { mechanism: string; username: string; password: string } };
}

const OPERATION = { read: AclOperationTypes.READ, write: AclOperationTypes.WRITE, describe: AclOperationTypes.DESCRIBE, create: AclOperationTypes.CREATE };

/** Kafka's name for a SCRAM or PLAIN login: `User:<name>`. */
export function kafkaPrincipal(username: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(username)) throw new Error(`a principal is letters, digits, '.', '_' or '-', got '${username}'`);
  return `User:${username}`;
}

/**
 * Allow `acls` to `principal` on the brokers (CreateAcls). Creating an ACL that exists changes nothing,
 * so granting a role twice is harmless. Rights are only ever added: a role that lost a right keeps it on
 * the broker until an operator deletes it (`kafka-acls.sh --remove`), a narrowing no tool should do
 * behind the operator's back.
 */
export async function grantAcls(connection: KafkaAdminConnection, principal: string, acls: readonly AclEntry[]): Promise<void> {
  const { ssl, sasl } = connection.security ?? {};
  const kafka = new Kafka({
    clientId: 'robustrl-acls',
    brokers: connection.brokers,
    logLevel: logLevel.NOTHING,
    ...(ssl ? { ssl: ssl.ca ? { ca: [ssl.ca] } : true } : {}),
    ...(sasl ? { sasl: sasl as SASLOptions } : {}),
  });
  const admin = kafka.admin();
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
