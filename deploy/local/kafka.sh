#!/usr/bin/env bash
# Local single-node Apache Kafka (KRaft, combined broker+controller) without Docker.
#
# The broker is the real Apache Kafka, assembled from Maven Central jars
# (org.apache.kafka:kafka_2.13 + a logging backend, see kafka/pom.xml) and run
# with plain `java -cp 'libs/*' kafka.Kafka server.properties`.
#
# Usage: deploy/local/kafka.sh <install|start|stop|restart|status|env|logs [-f]>
#
# Environment overrides:
#   ROBUSTRL_LOCAL_DIR     state dir (default: <repo>/.local); Kafka lives in $ROBUSTRL_LOCAL_DIR/kafka
#   KAFKA_LIBS_DIR         where the jars are (default: $ROBUSTRL_LOCAL_DIR/kafka/libs), e.g. another broker's
#   KAFKA_VERSION          kafka_2.13 version from Maven Central (default 3.9.1; 4.x supported)
#   KAFKA_HOST             address the client listener binds and advertises (default 127.0.0.1; e.g. a
#                          bridge's address so processes in network namespaces reach the broker)
#   KAFKA_PORT             client listener port (default 19092)
#   KAFKA_CONTROLLER_PORT  KRaft controller port, on 127.0.0.1 always (default 19093)
#   KAFKA_SECURITY         plaintext (default) or sasl-ssl: the client listener speaks TLS (a CA made on
#                          first start, its certificate in $KAFKA_DIR/tls/ca.pem), clients log in with
#                          SCRAM-SHA-512, and topic ACLs apply (`principal` creates a client's login and
#                          rights); decide before the first start (the storage is formatted with it)
#   KAFKA_NUM_PARTITIONS   default partitions for auto-created topics (default 3)
#   KAFKA_CLUSTER_ID       cluster id used to format storage (default fixed value)
#   KAFKA_HEAP_OPTS        JVM heap flags (default "-Xms256m -Xmx512m")
#   KAFKA_START_TIMEOUT    seconds to wait for readiness (default 90)
#   KAFKA_STOP_TIMEOUT     seconds to wait after SIGTERM before SIGKILL (default 30)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_DIR="$(cd "${SCRIPT_DIR}/../.." && pwd)"
LOG_TAG="kafka"
# shellcheck source=lib/common.sh source-path=SCRIPTDIR
source "${SCRIPT_DIR}/lib/common.sh"

KAFKA_VERSION="${KAFKA_VERSION:-3.9.1}"
KAFKA_HOST="${KAFKA_HOST:-127.0.0.1}"
# The KRaft controller never leaves the machine: only the client listener follows KAFKA_HOST.
CONTROLLER_HOST="127.0.0.1"
KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
KAFKA_NUM_PARTITIONS="${KAFKA_NUM_PARTITIONS:-3}"
# Any valid Kafka UUID (22 chars of base64 for 16 bytes). This one is from the Kafka docs.
KAFKA_CLUSTER_ID="${KAFKA_CLUSTER_ID:-MkU3OEVBNTcwNTJENDM2Qg}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
KAFKA_SECURITY="${KAFKA_SECURITY:-plaintext}"
case "${KAFKA_SECURITY}" in plaintext | sasl-ssl) ;; *) echo "KAFKA_SECURITY must be plaintext or sasl-ssl, got '${KAFKA_SECURITY}'" >&2; exit 2 ;; esac
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"

POM="${SCRIPT_DIR}/kafka/pom.xml"
KAFKA_DIR="${STATE_DIR}/kafka"
# A second broker (e.g. a test's own, to stop and start) may share the jars of the first.
LIBS_DIR="${KAFKA_LIBS_DIR:-${KAFKA_DIR}/libs}"
DATA_DIR="${KAFKA_DIR}/data"
PROPS_FILE="${KAFKA_DIR}/server.properties"
LOG4J_FILE="${KAFKA_DIR}/log4j.properties"
LOG4J2_FILE="${KAFKA_DIR}/log4j2.properties"
LOG_FILE="${KAFKA_DIR}/kafka.log"
PID_FILE="${KAFKA_DIR}/kafka.pid"
LOCK_FILE="${KAFKA_DIR}/.lock"
VERSION_MARKER="${LIBS_DIR}/.kafka-version"
TLS_DIR="${KAFKA_DIR}/tls"
SECRETS_DIR="${KAFKA_DIR}/secrets"
# KafkaBroker.STARTED_MESSAGE, logged by KafkaRaftServer once the broker serves requests.
STARTED_MESSAGE="Kafka Server started"

usage() {
  cat >&2 <<EOF
Usage: $(basename "$0") <install|start|stop|restart|status|env|logs [-f]>

  install  download Kafka ${KAFKA_VERSION} jars from Maven Central (+ kcat via apt, best effort)
  start    install if needed, format storage if needed, start the broker and wait until ready
  stop     stop the broker (SIGTERM, then SIGKILL after ${KAFKA_STOP_TIMEOUT}s)
  restart  stop + start
  status   exit 0 and print "kafka up at ${KAFKA_HOST}:${KAFKA_PORT}" if reachable, else exit 1
  env      print KAFKA_BROKERS=${KAFKA_HOST}:${KAFKA_PORT} (and with sasl-ssl the CA and the admin's login)
  principal NAME ROLE [MACHINE]
           (sasl-ssl) create the login NAME with the topic ACLs of ROLE: detector, controller,
           request-manager, rollout-manager, weight-registry, agent (of MACHINE, default NAME) or operator
           and print its settings (KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD_FILE, KAFKA_SSL_CA_FILE)
  logs     print the last 200 log lines (-f, or a terminal on stdout: follow)

State: ${KAFKA_DIR}
EOF
}

# Serialize install/start/stop across concurrent invocations.
# The broker's configuration and its TLS/SASL material (write_config, listener_config, ensure_security_material).
# shellcheck source=deploy/local/lib/kafka-config.sh
source "${SCRIPT_DIR}/lib/kafka-config.sh"

take_lock() {
  mkdir -p "${KAFKA_DIR}"
  exec 9>"${LOCK_FILE}"
  if ! flock -w 600 9; then
    die "timed out waiting for ${LOCK_FILE} (another kafka.sh still running?)"
  fi
}

is_kafka_4() { [[ "${KAFKA_VERSION}" == 4.* ]]; }

java_major() {
  java -XshowSettings:properties -version 2>&1 |
    sed -n 's/^ *java\.specification\.version = //p' | sed 's/^1\.//' | cut -d. -f1
}

# jar_has JAR ENTRY...: true when every ENTRY is in the jar's listing.
jar_has() {
  local jar="$1" listing entry
  shift
  if command -v unzip >/dev/null 2>&1; then
    listing="$(unzip -Z1 "${jar}" 2>/dev/null)" || return 1
  elif command -v jar >/dev/null 2>&1; then
    listing="$(jar tf "${jar}" 2>/dev/null)" || return 1
  else
    # No listing tool: fall back to a byte search for the entry names.
    listing="$(grep -aoE 'kafka/(Kafka|tools/StorageTool)\.class' "${jar}" 2>/dev/null)" || return 1
  fi
  for entry in "$@"; do
    grep -qxF "${entry}" <<<"${listing}" || return 1
  done
}

# libs_ok DIR: DIR holds the broker jar with kafka.Kafka and StorageTool.
libs_ok() {
  local dir="$1" jar
  for jar in "${dir}"/kafka_2.13-*.jar; do
    [[ -f "${jar}" ]] || continue
    [[ "${jar}" == *-sources.jar || "${jar}" == *-test.jar ]] && continue
    if jar_has "${jar}" kafka/Kafka.class kafka/tools/StorageTool.class; then
      return 0
    fi
  done
  return 1
}

is_installed() {
  [[ -f "${VERSION_MARKER}" ]] &&
    [[ "$(cat "${VERSION_MARKER}")" == "${KAFKA_VERSION}" ]] &&
    libs_ok "${LIBS_DIR}"
}

install_kcat() {
  if command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1; then
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1 || ! can_be_root; then
    warn "kcat/kafkacat not found and apt-get is not usable; install it yourself (Debian package 'kafkacat')"
    return 0
  fi
  log "installing kcat (Debian package 'kafkacat') via apt-get"
  if apt_install kafkacat; then
    log "kcat installed: $(command -v kcat || command -v kafkacat || echo '?')"
  else
    warn "could not install 'kafkacat' via apt-get; continuing without kcat"
  fi
  return 0
}

cmd_install() {
  ensure_state_dir
  take_lock
  if is_installed; then
    log "Kafka ${KAFKA_VERSION} already installed in ${LIBS_DIR}"
  else
    if running_pid >/dev/null; then
      die "a broker is running from ${LIBS_DIR} with a different version; run '$0 stop' first"
    fi
    command -v java >/dev/null 2>&1 || die "java not found (need Java 17: apt-get install openjdk-17-jre-headless)"
    command -v mvn >/dev/null 2>&1 || die "mvn not found (apt-get install maven)"
    local major need=11
    is_kafka_4 && need=17
    major="$(java_major)"
    if [[ -n "${major}" && "${major}" -lt "${need}" ]]; then
      die "Kafka ${KAFKA_VERSION} needs Java >= ${need}, found ${major}"
    fi

    local tmp profile=()
    is_kafka_4 && profile=(-Pkafka4)
    tmp="$(mktemp -d "${KAFKA_DIR}/libs.tmp.XXXXXX")"
    # shellcheck disable=SC2064  # expand now: tmp is local
    trap "rm -rf '${tmp}'" EXIT
    log "downloading Kafka ${KAFKA_VERSION} jars from Maven Central (first time: a few minutes)..."
    local t0=${SECONDS}
    # Maven 3.8 emits stray ANSI resets even in batch/quiet mode; strip them (pipefail keeps mvn's status).
    if ! mvn -B -q -Dstyle.color=never -f "${POM}" "${profile[@]}" -Dkafka.version="${KAFKA_VERSION}" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="${tmp}" 2>&1 |
      sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2; then
      die "mvn dependency:copy-dependencies failed for kafka_2.13:${KAFKA_VERSION}"
    fi
    libs_ok "${tmp}" || die "kafka_2.13-${KAFKA_VERSION}.jar lacks kafka.Kafka / kafka.tools.StorageTool"
    printf '%s\n' "${KAFKA_VERSION}" >"${tmp}/.kafka-version"
    rm -rf "${LIBS_DIR}"
    mv "${tmp}" "${LIBS_DIR}"
    trap - EXIT
    log "installed Kafka ${KAFKA_VERSION}: $(find "${LIBS_DIR}" -name '*.jar' | wc -l) jars in ${LIBS_DIR} ($((SECONDS - t0))s)"
  fi
  install_kcat
}

java_log_opts() {
  printf '%s\n' "-Dlog4j.configuration=file:${LOG4J_FILE}" \
    "-Dlog4j2.configurationFile=${LOG4J2_FILE}" \
    "-Dkafka.logs.dir=${KAFKA_DIR}"
}

format_storage() {
  if [[ -f "${DATA_DIR}/meta.properties" ]]; then
    return 0
  fi
  log "formatting KRaft storage in ${DATA_DIR} (cluster id ${KAFKA_CLUSTER_ID})"
  local out opts
  mapfile -t opts < <(java_log_opts)
  local scram=()
  # SCRAM logins live in the cluster metadata: the admin's is written when the storage is formatted.
  [[ "${KAFKA_SECURITY}" == sasl-ssl ]] && scram=(--add-scram "SCRAM-SHA-512=[name=admin,password=$(cat "${SECRETS_DIR}/admin.password")]")
  if ! out="$(java -Xmx256m "${opts[@]}" -cp "${LIBS_DIR}/*" kafka.tools.StorageTool format \
    -t "${KAFKA_CLUSTER_ID}" -c "${PROPS_FILE}" --ignore-formatted "${scram[@]}" 2>&1)"; then
    printf '%s\n' "${out}" >&2
    die "kafka-storage format failed"
  fi
}

# Print the pid of our running broker (pid file + process is a kafka.Kafka JVM); else fail.
running_pid() {
  local pid
  [[ -f "${PID_FILE}" ]] || return 1
  pid="$(tr -dc '0-9' <"${PID_FILE}")"
  pid_alive "${pid}" || return 1
  if [[ -r "/proc/${pid}/cmdline" ]] && ! tr '\0' ' ' <"/proc/${pid}/cmdline" | grep -q 'kafka\.Kafka'; then
    return 1 # pid was reused by something else
  fi
  printf '%s\n' "${pid}"
}

started_in_log() { [[ -f "${LOG_FILE}" ]] && grep -qF "${STARTED_MESSAGE}" "${LOG_FILE}"; }

show_log_tail() {
  if [[ -f "${LOG_FILE}" ]]; then
    printf -- '----- last 50 lines of %s -----\n' "${LOG_FILE}" >&2
    tail -n 50 "${LOG_FILE}" >&2
    printf -- '-----\n' >&2
  fi
}

# wait_ready PID: wait until the port accepts connections and the log shows the started message.
wait_ready() {
  local pid="$1" deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! pid_alive "${pid}"; then
      show_log_tail
      rm -f "${PID_FILE}"
      die "broker process ${pid} exited during startup (see ${LOG_FILE})"
    fi
    if port_open "${KAFKA_HOST}" "${KAFKA_PORT}" && started_in_log; then
      return 0
    fi
    sleep 0.5
  done
  show_log_tail
  warn "broker not ready after ${KAFKA_START_TIMEOUT}s; stopping pid ${pid}"
  stop_pid "${pid}"
  die "Kafka failed to start (see ${LOG_FILE})"
}

stop_pid() {
  local pid="$1" deadline
  kill -TERM "${pid}" 2>/dev/null || true
  deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
  while pid_alive "${pid}" && ((SECONDS < deadline)); do
    sleep 0.5
  done
  if pid_alive "${pid}"; then
    warn "pid ${pid} still alive after ${KAFKA_STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "${pid}" 2>/dev/null || true
    while pid_alive "${pid}"; do sleep 0.2; done
  fi
  rm -f "${PID_FILE}"
}

cmd_start() {
  local pid t0=${SECONDS}
  if pid="$(running_pid)"; then
    if port_open "${KAFKA_HOST}" "${KAFKA_PORT}"; then
      log "already running (pid ${pid}) at ${KAFKA_HOST}:${KAFKA_PORT}"
      return 0
    fi
  fi
  cmd_install
  # cmd_install took the lock (fd 9); it is held until this script exits.
  if pid="$(running_pid)"; then
    log "broker pid ${pid} is starting; waiting for it"
    wait_ready "${pid}"
    log "kafka up at ${KAFKA_HOST}:${KAFKA_PORT} (pid ${pid})"
    return 0
  fi
  local p
  for p in "${KAFKA_HOST}:${KAFKA_PORT}" "${CONTROLLER_HOST}:${KAFKA_CONTROLLER_PORT}"; do
    if port_open "${p%:*}" "${p##*:}"; then
      die "${p} is already in use by another process (pid: $(pid_listening_on "${p##*:}")); stop it or set KAFKA_PORT/KAFKA_CONTROLLER_PORT"
    fi
  done

  ensure_security_material
  write_config
  format_storage

  # One log per run, so the readiness check only sees this run's messages.
  if [[ -f "${LOG_FILE}" ]]; then
    mv -f "${LOG_FILE}" "${LOG_FILE}.prev"
  fi
  local heap opts
  read -r -a heap <<<"${KAFKA_HEAP_OPTS}"
  mapfile -t opts < <(java_log_opts)
  log "starting Kafka ${KAFKA_VERSION} at ${KAFKA_HOST}:${KAFKA_PORT} (log: ${LOG_FILE})"
  (
    cd "${KAFKA_DIR}"
    # setsid: own session, so the broker survives the calling shell/terminal.
    # Not a process-group leader here, so setsid execs in place and $! is the JVM pid.
    exec nohup setsid java "${heap[@]}" -server \
      -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
      -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError \
      -Djava.awt.headless=true "${opts[@]}" \
      -cp "${LIBS_DIR}/*" kafka.Kafka "${PROPS_FILE}" \
      </dev/null >>"${LOG_FILE}" 2>&1 9>&-
  ) &
  pid=$!
  printf '%s\n' "${pid}" >"${PID_FILE}"
  wait_ready "${pid}"
  log "kafka up at ${KAFKA_HOST}:${KAFKA_PORT} (pid ${pid}, $((SECONDS - t0))s)"
}

cmd_stop() {
  take_lock
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "${PID_FILE}"
    log "not running"
    if port_open "${KAFKA_HOST}" "${KAFKA_PORT}"; then
      warn "${KAFKA_HOST}:${KAFKA_PORT} is still served by another process (pid: $(pid_listening_on "${KAFKA_PORT}")), not started by this script"
    fi
    return 0
  fi
  log "stopping pid ${pid}"
  stop_pid "${pid}"
  log "stopped"
}

cmd_status() {
  if port_open "${KAFKA_HOST}" "${KAFKA_PORT}"; then
    echo "kafka up at ${KAFKA_HOST}:${KAFKA_PORT}"
    return 0
  fi
  echo "kafka down (${KAFKA_HOST}:${KAFKA_PORT} not reachable)"
  return 1
}

cmd_env() {
  echo "KAFKA_BROKERS=${KAFKA_HOST}:${KAFKA_PORT}"
  if [[ "${KAFKA_SECURITY}" == sasl-ssl ]]; then
    echo "KAFKA_SSL_CA_FILE=${TLS_DIR}/ca.pem"
    echo "KAFKA_SASL_MECHANISM=scram-sha-512"
    echo "KAFKA_SASL_USERNAME=admin"
    echo "KAFKA_SASL_PASSWORD_FILE=${SECRETS_DIR}/admin.password"
  fi
}

# principal NAME ROLE [MACHINE]: a SCRAM login for one client (a service, an agent, an operator) and the
# topic ACLs of its role (libs/bus/src/kafka/topic-acls.ts, granted by `robustrl kafka grant` with the
# admin's login); prints the client's settings.
cmd_principal() {
  local name="${1:-}" role="${2:-}" machine="${3:-}"
  [[ "${KAFKA_SECURITY}" == sasl-ssl ]] || die "principal needs KAFKA_SECURITY=sasl-ssl"
  [[ "${name}" =~ ^[A-Za-z0-9._-]+$ ]] || die "principal: NAME must be letters, digits, '.', '_' or '-', got '${name}'"
  case "${role}" in
    detector | controller | request-manager | rollout-manager | weight-registry | agent | operator) ;;
    *) die "principal: ROLE must be detector, controller, request-manager, rollout-manager, weight-registry, agent or operator, got '${role}'" ;;
  esac
  [[ -z "${machine}" || "${role}" == agent ]] || die "principal: MACHINE is for an agent only"
  [[ -f "${ROOT_DIR}/cli/dist/main.js" ]] || die "principal grants ACLs with the robustrl CLI: build it first (npm run build)"
  running_pid >/dev/null || die "the broker is not running; start it first"
  local pw_file="${SECRETS_DIR}/users/${name}.password" admin_conf="${SECRETS_DIR}/admin.properties"
  [[ -f "${pw_file}" ]] || (umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=' >"${pw_file}")
  (
    umask 077
    cat >"${admin_conf}" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(cat "${SECRETS_DIR}/admin.password")";
ssl.truststore.type=PEM
ssl.truststore.location=${TLS_DIR}/ca.pem
ssl.endpoint.identification.algorithm=
EOF
  )
  local opts
  mapfile -t opts < <(java_log_opts)
  java -Xmx256m "${opts[@]}" -cp "${LIBS_DIR}/*" kafka.admin.ConfigCommand --bootstrap-server "${KAFKA_HOST}:${KAFKA_PORT}" \
    --command-config "${admin_conf}" --alter --add-config "SCRAM-SHA-512=[password=$(cat "${pw_file}")]" \
    --entity-type users --entity-name "${name}" >/dev/null 2>&1 || die "could not create the SCRAM login ${name}"
  KAFKA_BROKERS="${KAFKA_HOST}:${KAFKA_PORT}" KAFKA_SSL_CA_FILE="${TLS_DIR}/ca.pem" KAFKA_SASL_MECHANISM=scram-sha-512 \
    KAFKA_SASL_USERNAME=admin KAFKA_SASL_PASSWORD_FILE="${SECRETS_DIR}/admin.password" ROBUSTRL_TOPIC_PREFIX="${ROBUSTRL_TOPIC_PREFIX:-}" \
    node "${ROOT_DIR}/cli/bin/robustrl.js" kafka grant "${name}" --role "${role}" ${machine:+--machine "${machine}"} >&2 ||
    die "could not grant the ACLs of ${role} to ${name}"
  echo "KAFKA_BROKERS=${KAFKA_HOST}:${KAFKA_PORT}"
  echo "KAFKA_SSL_CA_FILE=${TLS_DIR}/ca.pem"
  echo "KAFKA_SASL_MECHANISM=scram-sha-512"
  echo "KAFKA_SASL_USERNAME=${name}"
  echo "KAFKA_SASL_PASSWORD_FILE=${pw_file}"
}

cmd_logs() {
  [[ -f "${LOG_FILE}" ]] || die "no log yet at ${LOG_FILE}"
  if [[ "${1:-}" == "-f" || -t 1 ]]; then
    exec tail -n 200 -F "${LOG_FILE}"
  fi
  tail -n 200 "${LOG_FILE}"
}

main() {
  local cmd="${1:-}"
  shift || true
  case "${cmd}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    restart)
      cmd_stop
      cmd_start
      ;;
    status) cmd_status ;;
    env) cmd_env ;;
    principal) cmd_principal "$@" ;;
    logs) cmd_logs "$@" ;;
    -h | --help | help)
      usage
      ;;
    *)
      usage
      exit 2
      ;;
  esac
}

main "$@"
