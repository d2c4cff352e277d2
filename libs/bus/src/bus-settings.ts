import { custom, fileOrValue, onOff, text } from '@robustrl/config';

/**
 * What every service reads for its bus (docs/operators/configuration-reference.md): the brokers, their TLS
 * and login (docs/operators/kafka.md), read by busConfigFromEnv and kafkaSecurityFromEnv, which keep the rules
 * between them (a login only over TLS, a mechanism with a login); and each process's identity on the bus
 * (docs/operators/security.md "Who speaks on the bus"), read by busIdentityFromEnv.
 */
const owner = 'services';

export const TOPIC_PREFIX = text('ROBUSTRL_TOPIC_PREFIX', {
  owner,
  meaning: 'with Kafka: prefix of every topic and consumer group (several deployments on one cluster; tests use it for isolation)',
  default: '',
  defaultText: 'none',
  pattern: /^[A-Za-z0-9._-]*$/,
  accepted: "letters, digits, '.', '_' and '-'",
});
export const KAFKA_EVICT_DEAD_MEMBERS = onOff('ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS', {
  owner,
  meaning:
    '`on`: before joining a consumer group, remove the members that dead processes of this host left in it (kill -9), so a restart does not wait for them; `off`: wait (docs/contributors/delivery-guarantees.md)',
  default: true,
});

// The brokers (docs/operators/kafka.md). Their values' forms beyond these are checked with the rest of the bus
// configuration (BusConfig), whose error names them.
export const KAFKA_BROKERS = custom('KAFKA_BROKERS', {
  owner,
  meaning: 'the Kafka bootstrap servers; unset, the in-process bus (embedded mode)',
  default: undefined,
  defaultText: 'none: the in-process bus',
  accepted: 'host:port, comma separated',
  parse: (raw) =>
    raw
      .split(',')
      .map((b) => b.trim())
      .filter(Boolean),
});
export const KAFKA_SSL = custom('KAFKA_SSL', {
  owner,
  meaning: "`true`: TLS to the brokers, checked against the system's CAs (`KAFKA_SSL_CA_FILE` implies TLS)",
  default: false,
  defaultText: 'false: plaintext, unless `KAFKA_SSL_CA_FILE` is set',
  accepted: 'true or false (any case)',
  parse: (raw) => (raw.toLowerCase() === 'true' ? true : raw.toLowerCase() === 'false' ? false : undefined),
});
export const KAFKA_SSL_CA_FILE = text('KAFKA_SSL_CA_FILE', {
  owner,
  meaning: "TLS to the brokers, checked against this CA's certificate (PEM)",
  default: undefined,
  accepted: 'a readable PEM file',
});
export const KAFKA_SASL_MECHANISM = custom('KAFKA_SASL_MECHANISM', {
  owner,
  meaning: "the client's login to the brokers, with `KAFKA_SASL_USERNAME` and `KAFKA_SASL_PASSWORD`; needs TLS (a login is never sent in the clear)",
  default: undefined,
  defaultText: 'none: no login',
  accepted: 'scram-sha-512, scram-sha-256 or plain (any case)',
  parse: (raw) => raw.toLowerCase(),
});
export const KAFKA_SASL_USERNAME = text('KAFKA_SASL_USERNAME', {
  owner,
  meaning: "with `KAFKA_SASL_MECHANISM`: the client's login name",
  default: undefined,
});
export const KAFKA_SASL_PASSWORD = fileOrValue('KAFKA_SASL_PASSWORD', {
  owner,
  meaning: "with `KAFKA_SASL_MECHANISM`: the client's password",
  both: 'file wins',
});

// Who a process is on the bus (docs/operators/security.md "Who speaks on the bus"): each a secret or key, also as
// `<NAME>_FILE`, a mounted secret; given both ways it is refused, as is an empty file.
const secret = (name: string, who: string, accepted: string, meaning: string) =>
  fileOrValue(name, { owner: who, meaning, accepted, both: 'refused', emptyFile: 'refused' });

export const IDENTITY_SECRET = secret(
  'ROBUSTRL_IDENTITY_SECRET',
  owner,
  'a secret of at least 32 characters',
  'the control plane (and the CLI): sign every record, accept only records signed by whom they speak for; unset, an unsigned deployment. An agent given it refuses to start',
);
export const CONTROLLER_COMMAND_SECRET = secret(
  'ROBUSTRL_CONTROLLER_COMMAND_SECRET',
  'controller',
  'a secret of at least 32 characters',
  'seeds the key its commands to agents are signed with, so that only the process holding it issues them; unset, the identity secret does. An agent given it refuses to start',
);
export const MACHINE_KEY = secret(
  'ROBUSTRL_MACHINE_KEY',
  'agent',
  'a machine key (32 bytes, base64url)',
  "the agent's own signing key (`robustrl identity machine-key <machine>`), with `ROBUSTRL_CONTROLLER_PUBLIC_KEY`: both or neither",
);
export const CONTROLLER_PUBLIC_KEY = secret(
  'ROBUSTRL_CONTROLLER_PUBLIC_KEY',
  'agent',
  'an Ed25519 public key',
  'the key the agent checks the commands it executes with (`robustrl identity controller-public-key`), with `ROBUSTRL_MACHINE_KEY`: both or neither',
);
export const CONTROL_PLANE_PUBLIC_KEY = secret(
  'ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY',
  'agent',
  'an Ed25519 public key',
  "the control plane's public key (`robustrl identity control-plane-public-key`): the agent acts on a retirement, a release or a probe only when the control plane signed it, and checks its role certificate with it; unset, on any (it says so at start)",
);
export const ROLE_CERTIFICATE = secret(
  'ROBUSTRL_ROLE_CERTIFICATE',
  'agent',
  'a role certificate for this machine and role',
  "with a machine key and role trainer or hybrid: the operator's certificate for that role (`robustrl identity role-certificate <machine> <role>`), shown with its registration",
);
