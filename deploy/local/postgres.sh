#!/usr/bin/env bash
# Local PostgreSQL server without Docker: the Debian `postgresql` package's binaries,
# running a project-local cluster (its own data dir, port and socket dir; the
# system-wide Debian cluster is not touched).
#
# Usage: deploy/local/postgres.sh <install|start|stop|restart|status|env|logs [-f]|psql [args]>
#
# Environment overrides:
#   ROBUSTRL_LOCAL_DIR   state dir (default: <repo>/.local); the cluster lives in $ROBUSTRL_LOCAL_DIR/postgres
#   PGPORT_LOCAL         TCP port on 127.0.0.1 (default 15432)
#   PG_START_TIMEOUT     seconds to wait for readiness (default 60)
#
# Root: initdb refuses to run as root, so when run as root every server-side command
# (initdb, pg_ctl, admin psql) runs as the `postgres` system user via `runuser`.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG="postgres"
# shellcheck source=lib/common.sh source-path=SCRIPTDIR
source "${SCRIPT_DIR}/lib/common.sh"

PG_HOST="127.0.0.1"
PG_PORT="${PGPORT_LOCAL:-15432}"
PG_START_TIMEOUT="${PG_START_TIMEOUT:-60}"
APP_USER="robustrl"
APP_PASSWORD="robustrl"
APP_DB="robustrl"
PG_OS_USER="postgres" # system user that owns the cluster when we are root
LOCK_FILE="${STATE_DIR}/.postgres.lock"

usage() {
  cat >&2 <<EOF
Usage: $(basename "$0") <install|start|stop|restart|status|env|logs [-f]|psql [args]>

  install  apt-get install postgresql if no /usr/lib/postgresql/*/bin/initdb exists
  start    install if needed, initdb if needed, start on ${PG_HOST}:${PG_PORT},
           ensure role '${APP_USER}' and database '${APP_DB}'
  stop     pg_ctl stop -m fast
  restart  stop + start
  status   exit 0 and print "postgres up at ${PG_HOST}:${PG_PORT}" if ready, else exit 1
  env      print DATABASE_URL=...
  logs     print the last 200 server log lines (-f, or a terminal on stdout: follow)
  psql     open psql as ${APP_USER} on the ${APP_DB} database (extra args passed through)
EOF
}

take_lock() {
  mkdir -p "${STATE_DIR}"
  exec 9>"${LOCK_FILE}"
  if ! flock -w 600 9; then
    die "timed out waiting for ${LOCK_FILE} (another postgres.sh still running?)"
  fi
}

# Highest installed major version's bin dir, e.g. /usr/lib/postgresql/15/bin.
pg_bin_dir() {
  local initdb
  initdb="$(find /usr/lib/postgresql -mindepth 3 -maxdepth 3 -path '*/bin/initdb' 2>/dev/null |
    sort -V | tail -n 1)"
  [[ -n "${initdb}" ]] || return 1
  dirname "${initdb}"
}

short_hash() { printf '%s' "$1" | sha256sum | cut -c1-10; }

# Run a server-side command as the cluster owner (postgres when we are root).
# cd / first: postgres cannot necessarily read the caller's cwd (e.g. /root).
as_pg() {
  if is_root; then
    (cd / && runuser -u "${PG_OS_USER}" -- "$@")
  else
    "$@"
  fi
}

# Decide where the cluster lives. Sets PG_BASE, PG_DATA, PG_SOCKET_DIR, PG_LOG.
# Default: $STATE_DIR/postgres. As root, the postgres user must be able to traverse
# every parent directory; when it cannot, fall back to /tmp/robustrl-pg-<hash>.
resolve_paths() {
  local quiet="${1:-}"
  PG_BASE="${STATE_DIR}/postgres"
  local fallback
  fallback="/tmp/robustrl-pg-$(short_hash "${STATE_DIR}")"
  if is_root && id -u "${PG_OS_USER}" >/dev/null 2>&1; then
    if [[ -d "${STATE_DIR}" ]] && ! runuser -u "${PG_OS_USER}" -- test -x "${STATE_DIR}" 2>/dev/null; then
      PG_BASE="${fallback}"
      [[ -n "${quiet}" ]] ||
        log "NOTE: user '${PG_OS_USER}' cannot traverse ${STATE_DIR}; using ${PG_BASE} for the cluster instead"
    fi
  fi
  PG_DATA="${PG_BASE}/data"
  PG_LOG="${PG_BASE}/postgres.log"
  PG_SOCKET_DIR="${PG_BASE}/run"
  # Unix socket paths are limited to 107 bytes (".s.PGSQL.<port>" is appended).
  if ((${#PG_SOCKET_DIR} + 20 > 100)); then
    PG_SOCKET_DIR="${fallback}-run"
    [[ -n "${quiet}" ]] || log "NOTE: socket path too long; using socket dir ${PG_SOCKET_DIR}"
  fi
}

require_bin() {
  PG_BIN="$(pg_bin_dir)" || die "PostgreSQL not installed (run '$0 install')"
  PG_MAJOR="$(basename "$(dirname "${PG_BIN}")")"
}

cmd_install() {
  local bin
  if bin="$(pg_bin_dir)"; then
    log "PostgreSQL found: ${bin}"
    return 0
  fi
  log "no /usr/lib/postgresql/*/bin/initdb; installing Debian package 'postgresql'"
  command -v apt-get >/dev/null 2>&1 || die "apt-get not available; install PostgreSQL server binaries manually"
  can_be_root || die "need root or sudo to apt-get install postgresql"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update >&2 || die "apt-get update failed"
  as_root apt-get install -y postgresql >&2 || die "apt-get install postgresql failed"
  bin="$(pg_bin_dir)" || die "postgresql installed but no /usr/lib/postgresql/*/bin/initdb found"
  log "PostgreSQL installed: ${bin}"
}

# Create a dir owned by the cluster owner.
pg_mkdir() {
  local dir="$1" mode="$2"
  mkdir -p "${dir}"
  chmod "${mode}" "${dir}"
  if is_root; then
    chown "${PG_OS_USER}:" "${dir}"
  fi
}

# Write stdin to FILE inside the cluster, owned by the cluster owner.
pg_write() {
  local file="$1"
  cat >"${file}"
  chmod 600 "${file}"
  if is_root; then
    chown "${PG_OS_USER}:" "${file}"
  fi
}

init_cluster() {
  require_bin
  ensure_state_dir
  if is_root; then
    id -u "${PG_OS_USER}" >/dev/null 2>&1 ||
      die "running as root but system user '${PG_OS_USER}' does not exist (it comes with the postgresql package)"
    # Our own state dir: make sure other users (postgres) may traverse it.
    chmod a+x "${STATE_DIR}" 2>/dev/null || true
  fi
  resolve_paths
  pg_mkdir "${PG_BASE}" 700
  pg_mkdir "${PG_SOCKET_DIR}" 700
  if [[ ! -f "${PG_DATA}/PG_VERSION" ]]; then
    if [[ -d "${PG_DATA}" && -n "$(ls -A "${PG_DATA}")" ]]; then
      die "${PG_DATA} exists, is not empty and has no PG_VERSION; move it away"
    fi
    pg_mkdir "${PG_DATA}" 700
    log "initdb ${PG_DATA} (PostgreSQL ${PG_MAJOR}$(is_root && printf ', as user %s' "${PG_OS_USER}"))"
    as_pg "${PG_BIN}/initdb" -D "${PG_DATA}" -U postgres --encoding=UTF8 --locale=C.UTF-8 \
      --auth-local=trust --auth-host=scram-sha-256 >"${PG_BASE}/initdb.log" 2>&1 || {
      cat "${PG_BASE}/initdb.log" >&2
      die "initdb failed"
    }
  else
    local have
    have="$(cat "${PG_DATA}/PG_VERSION")"
    [[ "${have}" == "${PG_MAJOR}" ]] ||
      die "${PG_DATA} is a PostgreSQL ${have} cluster but the newest binaries are ${PG_MAJOR}; remove the data dir or pg_upgrade it"
  fi

  # Our settings live in robustrl.conf, included last from postgresql.conf, so they win.
  pg_write "${PG_DATA}/robustrl.conf" <<EOF
# Generated by deploy/local/postgres.sh; rewritten on every start.
listen_addresses = '${PG_HOST}'
port = ${PG_PORT}
unix_socket_directories = '${PG_SOCKET_DIR}'
max_connections = 200
password_encryption = scram-sha-256
# Durability is traded for speed: this is a disposable local dev/test cluster.
# With these off, an OS crash or power loss can corrupt the cluster (a clean
# stop, or the server process crashing alone, is fine). Never copy to production.
fsync = off
synchronous_commit = off
full_page_writes = off
log_destination = 'stderr'
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
EOF
  if ! grep -qF "include_if_exists = 'robustrl.conf'" "${PG_DATA}/postgresql.conf"; then
    printf "\n# Added by deploy/local/postgres.sh\ninclude_if_exists = 'robustrl.conf'\n" >>"${PG_DATA}/postgresql.conf"
  fi
  # Trust on the unix socket (only reachable through the private socket dir);
  # passwords (SCRAM) for TCP on loopback.
  pg_write "${PG_DATA}/pg_hba.conf" <<'EOF'
# Generated by deploy/local/postgres.sh; rewritten on every start.
# TYPE  DATABASE  USER  ADDRESS        METHOD
local   all       all                  trust
host    all       all   127.0.0.1/32   scram-sha-256
host    all       all   ::1/128        scram-sha-256
EOF
}

postmaster_pid() {
  [[ -f "${PG_DATA}/postmaster.pid" ]] || return 1
  head -n 1 "${PG_DATA}/postmaster.pid" 2>/dev/null | tr -dc '0-9'
}

# True when the postmaster recorded in postmaster.pid is alive (not a zombie).
cluster_running() {
  local pid
  pid="$(postmaster_pid)" || return 1
  pid_alive "${pid}" || return 1
  # Guard against pid reuse by an unrelated process.
  [[ "$(cat "/proc/${pid}/comm" 2>/dev/null)" == postgres* ]]
}

# After a crash (kill -9), postmaster.pid names a dead postmaster; PID 1 may not have
# reaped it yet, and postgres refuses to start while that pid still "exists".
wait_stale_postmaster() {
  local pid
  pid="$(postmaster_pid)" || return 0
  [[ -n "${pid}" ]] || return 0
  if kill -0 "${pid}" 2>/dev/null && ! pid_alive "${pid}"; then
    log "previous postmaster (pid ${pid}) died uncleanly; waiting for it to be reaped"
    wait_gone "${pid}" 30 || warn "pid ${pid} still not reaped after 30s"
  fi
}

pg_ctl_start() {
  # 9>&-: the postmaster must not inherit (and hold) our lock fd.
  as_pg "${PG_BIN}/pg_ctl" -D "${PG_DATA}" -l "${PG_LOG}" -w -t "${PG_START_TIMEOUT}" start \
    >/dev/null 2>&1 9>&-
}

is_ready() {
  local isready
  if [[ -n "${PG_BIN:-}" ]]; then
    isready="${PG_BIN}/pg_isready"
  elif command -v pg_isready >/dev/null 2>&1; then
    isready="pg_isready"
  else
    port_open "${PG_HOST}" "${PG_PORT}"
    return
  fi
  "${isready}" -q -h "${PG_HOST}" -p "${PG_PORT}" -t 2 >/dev/null 2>&1
}

admin_psql() {
  as_pg "${PG_BIN}/psql" -X -q -v ON_ERROR_STOP=1 -h "${PG_SOCKET_DIR}" -p "${PG_PORT}" \
    -U postgres -d postgres "$@"
}

# Idempotently create the application role and database.
ensure_db() {
  admin_psql -v app_user="${APP_USER}" -v app_pw="${APP_PASSWORD}" -v app_db="${APP_DB}" >/dev/null <<'SQL'
SELECT format('CREATE ROLE %I LOGIN CREATEDB NOSUPERUSER PASSWORD %L', :'app_user', :'app_pw')
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app_user') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'app_db', :'app_user')
  WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'app_db') \gexec
SQL
}

show_log_tail() {
  if [[ -f "${PG_LOG}" ]]; then
    printf -- '----- last 50 lines of %s -----\n' "${PG_LOG}" >&2
    tail -n 50 "${PG_LOG}" >&2
    printf -- '-----\n' >&2
  fi
}

cmd_start() {
  local t0=${SECONDS}
  resolve_paths quiet
  PG_BIN="$(pg_bin_dir || true)"
  if cluster_running && is_ready; then
    ensure_db
    log "already running at ${PG_HOST}:${PG_PORT} (data ${PG_DATA})"
    return 0
  fi
  take_lock
  cmd_install
  init_cluster
  if ! cluster_running; then
    if port_open "${PG_HOST}" "${PG_PORT}"; then
      die "${PG_HOST}:${PG_PORT} is already in use by another process (pid: $(pid_listening_on "${PG_PORT}")); stop it or set PGPORT_LOCAL"
    fi
    if [[ ! -f "${PG_LOG}" ]]; then
      : >"${PG_LOG}"
      if is_root; then chown "${PG_OS_USER}:" "${PG_LOG}"; fi
    fi
    log "starting PostgreSQL ${PG_MAJOR} at ${PG_HOST}:${PG_PORT} (data ${PG_DATA}, log ${PG_LOG})"
    wait_stale_postmaster
    if ! pg_ctl_start; then
      # After a crash, orphaned backends can hold the old shared memory for a moment.
      warn "pg_ctl start failed; retrying once in 3s"
      sleep 3
      if ! pg_ctl_start; then
        show_log_tail
        die "pg_ctl start failed (see ${PG_LOG})"
      fi
    fi
  fi
  local deadline=$((SECONDS + PG_START_TIMEOUT))
  until is_ready; do
    if ! cluster_running; then
      show_log_tail
      die "PostgreSQL is not running (see ${PG_LOG})"
    fi
    if ((SECONDS >= deadline)); then
      show_log_tail
      die "PostgreSQL not ready on ${PG_HOST}:${PG_PORT} after ${PG_START_TIMEOUT}s"
    fi
    sleep 0.5
  done
  ensure_db
  log "postgres up at ${PG_HOST}:${PG_PORT} ($((SECONDS - t0))s)"
}

cmd_stop() {
  resolve_paths quiet
  PG_BIN="$(pg_bin_dir || true)"
  take_lock
  if ! cluster_running; then
    log "not running"
    return 0
  fi
  log "stopping (pg_ctl stop -m fast)"
  as_pg "${PG_BIN}/pg_ctl" -D "${PG_DATA}" -m fast -w -t 60 stop >/dev/null
  log "stopped"
}

cmd_status() {
  PG_BIN="$(pg_bin_dir || true)"
  if is_ready; then
    echo "postgres up at ${PG_HOST}:${PG_PORT}"
    return 0
  fi
  echo "postgres down (${PG_HOST}:${PG_PORT} not ready)"
  return 1
}

database_url() {
  printf 'postgres://%s:%s@%s:%s/%s\n' "${APP_USER}" "${APP_PASSWORD}" "${PG_HOST}" "${PG_PORT}" "${APP_DB}"
}

cmd_env() { echo "DATABASE_URL=$(database_url)"; }

cmd_logs() {
  resolve_paths quiet
  [[ -f "${PG_LOG}" ]] || die "no log yet at ${PG_LOG}"
  if [[ "${1:-}" == "-f" || -t 1 ]]; then
    exec tail -n 200 -F "${PG_LOG}"
  fi
  tail -n 200 "${PG_LOG}"
}

cmd_psql() {
  local psql bin
  if bin="$(pg_bin_dir)"; then psql="${bin}/psql"; else psql="psql"; fi
  exec "${psql}" "$(database_url)" "$@"
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
    logs) cmd_logs "$@" ;;
    psql) cmd_psql "$@" ;;
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
