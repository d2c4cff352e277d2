# shellcheck shell=bash
# Shared helpers for deploy/local/*.sh. Source it; do not execute it.
#
# Sets:
#   REPO_ROOT  - repository root (two levels above deploy/local/)
#   STATE_DIR  - ${ROBUSTRL_LOCAL_DIR:-$REPO_ROOT/.local}

if [[ -n "${_ROBUSTRL_COMMON_SH:-}" ]]; then
  return 0
fi
_ROBUSTRL_COMMON_SH=1

_common_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "${_common_dir}/../../.." && pwd)"
STATE_DIR="${ROBUSTRL_LOCAL_DIR:-${REPO_ROOT}/.local}"
unset _common_dir

LOG_TAG="${LOG_TAG:-local}"

log() { printf '[%s] %s\n' "${LOG_TAG}" "$*" >&2; }
warn() { printf '[%s] WARNING: %s\n' "${LOG_TAG}" "$*" >&2; }
die() {
  printf '[%s] ERROR: %s\n' "${LOG_TAG}" "$*" >&2
  exit 1
}

is_root() { [[ "$(id -u)" -eq 0 ]]; }

# Run a command with root privileges: directly when root, via sudo otherwise.
# Returns 127 when neither is possible.
as_root() {
  if is_root; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    return 127
  fi
}

can_be_root() { is_root || command -v sudo >/dev/null 2>&1; }

# apt_install PKG... : install Debian packages, running `apt-get update` first
# only when the plain install fails (stale or missing package lists).
apt_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  can_be_root || return 1
  export DEBIAN_FRONTEND=noninteractive
  if as_root apt-get install -y --no-install-recommends "$@" >&2; then
    return 0
  fi
  log "apt-get install failed; running apt-get update and retrying"
  as_root apt-get update >&2 && as_root apt-get install -y --no-install-recommends "$@" >&2
}

# port_open HOST PORT : true when a TCP connection to HOST:PORT succeeds.
port_open() {
  # shellcheck disable=SC2016  # $1/$2 expand in the child bash, on purpose
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" >/dev/null 2>&1
}

# pid_alive PID : true when the process exists and is not a zombie. A daemon we
# detached is reparented to PID 1, which may take a few seconds to reap it after it
# exits; until then kill -0 still succeeds, so zombies count as dead here.
pid_alive() {
  local state
  [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null || return 1
  state="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" || true
  [[ -n "${state}" && "${state}" != "Z" ]]
}

# wait_gone PID SECONDS : wait until PID no longer exists at all (zombie reaped).
wait_gone() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.2
  done
  ! kill -0 "$1" 2>/dev/null
}

# pid_listening_on PORT : print the pid(s) listening on 127.0.0.1:PORT (best effort).
pid_listening_on() {
  command -v ss >/dev/null 2>&1 || return 0
  ss -Htlnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u | paste -sd' ' -
}

# Ensure .local/ is ignored by git (append only that line; create file if missing).
ensure_gitignore() {
  local gi="${REPO_ROOT}/.gitignore"
  # Only relevant when the state dir is the default in-repo one.
  if [[ -n "${ROBUSTRL_LOCAL_DIR:-}" ]]; then
    return 0
  fi
  if [[ ! -f "${gi}" ]] || ! grep -qxF '.local/' "${gi}"; then
    if [[ -s "${gi}" && -n "$(tail -c1 "${gi}")" ]]; then
      printf '\n' >>"${gi}"
    fi
    printf '.local/\n' >>"${gi}"
    log "added '.local/' to ${gi}"
  fi
}

ensure_state_dir() {
  mkdir -p "${STATE_DIR}"
  ensure_gitignore
}
