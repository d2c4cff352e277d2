#!/usr/bin/env bash
# Local infrastructure without Docker: PostgreSQL + Kafka (see kafka.sh, postgres.sh).
#
# Usage: deploy/local/services.sh <up|down|restart|status|env>
#   up       install (if needed) and start both; no-op for the ones already running
#   down     stop both; no-op for the ones not running
#   restart  down + up
#   status   one line per service; exit 0 only if both are up
#   env      KAFKA_BROKERS=... and DATABASE_URL=... lines, e.g.
#              eval "$(deploy/local/services.sh env | sed 's/^/export /')"
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG="services"
# shellcheck source=lib/common.sh source-path=SCRIPTDIR
source "${SCRIPT_DIR}/lib/common.sh"

KAFKA="${SCRIPT_DIR}/kafka.sh"
POSTGRES="${SCRIPT_DIR}/postgres.sh"

usage() {
  sed -n '4,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

cmd_up() {
  local t0=${SECONDS}
  "${POSTGRES}" start
  "${KAFKA}" start
  log "all services up ($((SECONDS - t0))s):"
  cmd_env >&2
}

cmd_down() {
  local rc=0
  "${KAFKA}" stop || rc=1
  "${POSTGRES}" stop || rc=1
  return "${rc}"
}

cmd_status() {
  local rc=0
  "${POSTGRES}" status || rc=1
  "${KAFKA}" status || rc=1
  return "${rc}"
}

cmd_env() {
  "${KAFKA}" env
  "${POSTGRES}" env
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  restart)
    cmd_down
    cmd_up
    ;;
  status) cmd_status ;;
  env) cmd_env ;;
  -h | --help | help) usage ;;
  *)
    usage
    exit 2
    ;;
esac
