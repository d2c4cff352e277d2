#!/bin/sh
# Kafka in the foreground, configured as the apache/kafka image is: every KAFKA_* variable becomes a
# server property (KAFKA_NUM_PARTITIONS → num.partitions). KRaft storage is formatted on first start.
set -eu
PROPS=/var/lib/kafka/server.properties
mkdir -p /var/lib/kafka/data
: >"${PROPS}"
env | while IFS='=' read -r name value; do
  case "${name}" in
    KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_CLUSTER_ID) ;;
    KAFKA_*) printf '%s=%s\n' "$(printf '%s' "${name#KAFKA_}" | tr 'A-Z_' 'a-z.')" "${value}" >>"${PROPS}" ;;
  esac
done
grep -q '^log.dirs=' "${PROPS}" || echo 'log.dirs=/var/lib/kafka/data' >>"${PROPS}"
if [ ! -f /var/lib/kafka/data/meta.properties ]; then
  java -cp '/opt/kafka/libs/*' kafka.tools.StorageTool format -t "${KAFKA_CLUSTER_ID:-MkU3OEVBNTcwNTJENDM2Qg}" -c "${PROPS}" --ignore-formatted
fi
exec java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError -Dlog4j.configuration=file:/opt/kafka/log4j.properties \
  -cp '/opt/kafka/libs/*' kafka.Kafka "${PROPS}"
