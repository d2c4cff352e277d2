#!/usr/bin/env node
'use strict';
/**
 * Apply a role's topic ACLs (libs/bus/src/kafka/topic-acls.ts) to a principal on a secured broker, with
 * the admin's login from the environment (KAFKA_BROKERS, KAFKA_SSL_CA_FILE, KAFKA_SASL_*; kafka.sh
 * principal sets them). Usage: node kafka-acls.js <principal> <service|agent>
 */
const { readFileSync } = require('node:fs');
const path = require('node:path');
const { Kafka, logLevel, AclResourceTypes, ResourcePatternTypes, AclOperationTypes, AclPermissionTypes } = require('kafkajs');
const { aclsFor } = require(path.join(__dirname, '..', '..', '..', 'libs', 'bus', 'dist'));

const [principal, role] = process.argv.slice(2);
if (!principal || (role !== 'service' && role !== 'agent')) {
  process.stderr.write('usage: kafka-acls.js <principal> <service|agent>\n');
  process.exit(2);
}
const env = process.env;
const kafka = new Kafka({
  clientId: 'robustrl-acls',
  brokers: env.KAFKA_BROKERS.split(','),
  logLevel: logLevel.ERROR,
  ssl: { ca: [readFileSync(env.KAFKA_SSL_CA_FILE, 'utf8')] },
  sasl: { mechanism: env.KAFKA_SASL_MECHANISM, username: env.KAFKA_SASL_USERNAME, password: readFileSync(env.KAFKA_SASL_PASSWORD_FILE, 'utf8').trim() },
});
const acl = aclsFor(role, env.ROBUSTRL_TOPIC_PREFIX || '').map((e) => ({
  resourceType: e.resource === 'topic' ? AclResourceTypes.TOPIC : AclResourceTypes.GROUP,
  resourceName: e.name,
  resourcePatternType: e.pattern === 'literal' ? ResourcePatternTypes.LITERAL : ResourcePatternTypes.PREFIXED,
  principal: `User:${principal}`,
  host: '*',
  operation: { read: AclOperationTypes.READ, write: AclOperationTypes.WRITE, describe: AclOperationTypes.DESCRIBE, create: AclOperationTypes.CREATE }[
    e.operation
  ],
  permissionType: AclPermissionTypes.ALLOW,
}));
(async () => {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createAcls({ acl });
    process.stderr.write(`[kafka] ${acl.length} ACLs of ${role} for User:${principal}\n`);
  } finally {
    await admin.disconnect();
  }
})().catch((err) => {
  process.stderr.write(`kafka-acls: ${err.message}\n`);
  process.exit(1);
});
