#!/bin/sh
# Kafka for deploy/compose with TLS, SCRAM-SHA-512 logins and ACLs: the entrypoint of the apache/kafka
# image (or of the local stand-in, deploy/compose/local-images/). Single node, KRaft.
#
#   start.sh              configure, format on first start, run the broker in the foreground
#   start.sh add-login N  create or update the SCRAM login N (its password in logins/N) on the running broker
#
# KAFKA_* variables become server properties as in the image (KAFKA_NUM_PARTITIONS → num.partitions);
# the listeners and security are set here. Secret material is read from /etc/robustrl/kafka
# (deploy/compose/init-secrets.sh): broker.p12 and broker.password (its TLS keystore), ca.crt, and
# logins/<name> (one password per login). Every login there is written into the cluster's metadata when
# the storage is first formatted; one added later needs `add-login`.
set -eu
SECRETS=/etc/robustrl/kafka
DATA="${KAFKA_LOG_DIRS:-/var/lib/kafka/data}"
PROPS=/tmp/robustrl-kafka.properties
ADMIN_CONF=/tmp/robustrl-kafka-admin.properties
CLUSTER_ID="${KAFKA_CLUSTER_ID:-MkU3OEVBNTcwNTJENDM2Qg}"
ADVERTISED="${ROBUSTRL_KAFKA_ADVERTISED_HOST:-kafka}"
umask 077

for f in broker.p12 broker.password ca.crt logins/admin; do
  [ -r "${SECRETS}/${f}" ] || { echo "kafka: ${SECRETS}/${f} is missing or unreadable (run deploy/compose/init-secrets.sh)" >&2; exit 1; }
done
admin_password="$(cat "${SECRETS}/logins/admin")"
store_password="$(cat "${SECRETS}/broker.password")"

# The image's tools where it has them (apache/kafka: /opt/kafka/bin), else the jars (the local stand-in).
kafka_tool() { # CLASS SCRIPT ARGS…
  class="$1" script="$2"
  shift 2
  if [ -x "/opt/kafka/bin/${script}" ]; then "/opt/kafka/bin/${script}" "$@"
  else java -Xmx256m -Dlog4j.configuration=file:/opt/kafka/log4j.properties -cp '/opt/kafka/libs/*' "${class}" "$@"; fi
}

cat >"${ADMIN_CONF}" <<CONF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="${admin_password}";
ssl.truststore.type=PEM
ssl.truststore.location=${SECRETS}/ca.crt
CONF

if [ "${1:-}" = add-login ]; then
  name="${2:?usage: start.sh add-login NAME}"
  [ -r "${SECRETS}/logins/${name}" ] || { echo "kafka: no password for ${name} in ${SECRETS}/logins" >&2; exit 1; }
  kafka_tool kafka.admin.ConfigCommand kafka-configs.sh --bootstrap-server "${ADVERTISED}:9092" --command-config "${ADMIN_CONF}" \
    --alter --add-config "SCRAM-SHA-512=[password=$(cat "${SECRETS}/logins/${name}")]" --entity-type users --entity-name "${name}"
  exit 0
fi

: >"${PROPS}"
env | while IFS='=' read -r name value; do
  case "${name}" in
    KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_CLUSTER_ID | KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_LOG4J_OPTS | KAFKA_GC_LOG_OPTS | KAFKA_JMX_OPTS | KAFKA_HOME | KAFKA_VERSION) ;;
    KAFKA_*) printf '%s=%s\n' "$(printf '%s' "${name#KAFKA_}" | tr 'A-Z_' 'a-z.')" "${value}" >>"${PROPS}" ;;
  esac
done
cat >>"${PROPS}" <<CONF
log.dirs=${DATA}
node.id=1
process.roles=broker,controller
# Clients: TLS and SCRAM only. The KRaft controller listens on loopback: no other container reaches it.
listeners=SASL_SSL://:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=SASL_SSL://${ADVERTISED}:9092
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="${admin_password}";
ssl.keystore.type=PKCS12
ssl.keystore.location=${SECRETS}/broker.p12
ssl.keystore.password=${store_password}
ssl.key.password=${store_password}
ssl.truststore.type=PEM
ssl.truststore.location=${SECRETS}/ca.crt
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
# admin: the broker itself and the operator who grants ACLs; ANONYMOUS: the controller listener (loopback).
super.users=User:admin;User:ANONYMOUS
CONF

mkdir -p "${DATA}"
if [ ! -f "${DATA}/meta.properties" ]; then
  set --
  for login in "${SECRETS}"/logins/*; do
    set -- "$@" --add-scram "SCRAM-SHA-512=[name=$(basename "${login}"),password=$(cat "${login}")]"
  done
  echo "kafka: formatting ${DATA} with $(($# / 2)) logins" >&2
  kafka_tool kafka.tools.StorageTool kafka-storage.sh format -t "${CLUSTER_ID}" -c "${PROPS}" --ignore-formatted "$@" >/dev/null
fi
if [ -x /opt/kafka/bin/kafka-server-start.sh ]; then exec /opt/kafka/bin/kafka-server-start.sh "${PROPS}"; fi
exec java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError -Dlog4j.configuration=file:/opt/kafka/log4j.properties \
  -cp '/opt/kafka/libs/*' kafka.Kafka "${PROPS}"
