#!/usr/bin/env bash
# The routers bench:router compares robustrl's with (bench/src/router/): the SGLang Model Gateway (PyPI's
# sglang-router) and its successor, the Shepherd Model Gateway (PyPI's smg), both Rust binaries shipped in
# their wheels, in one virtual environment; and a TCP_NODELAY shim (an LD_PRELOAD library) to run a
# gateway with Nagle's algorithm off, as Node runs every socket.
#
# Usage: deploy/local/router-baselines.sh <ensure|status>
#   ensure   create ${ROBUSTRL_LOCAL_DIR:-.local}/router-baselines/venv with both gateways and build the shim (cached)
#   status   prints the venv's python and the shim; exit 0 only if both are ready
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG="router-baselines"
# shellcheck source=lib/common.sh source-path=SCRIPTDIR
source "${SCRIPT_DIR}/lib/common.sh"

SGLANG_ROUTER_VERSION="${ROBUSTRL_SGLANG_ROUTER_VERSION:-0.3.2}"
SMG_VERSION="${ROBUSTRL_SMG_VERSION:-1.13.0}"
DIR="${STATE_DIR}/router-baselines"
VENV="${DIR}/venv"
PY="${VENV}/bin/python"
SHIM_SRC="${REPO_ROOT}/bench/src/router/tcp-nodelay-shim.c"
SHIM="${DIR}/tcp-nodelay.so"
# What the venv was built from: changed versions rebuild it.
STAMP="${VENV}/.robustrl-stamp"
WANT="sglang-router==${SGLANG_ROUTER_VERSION} smg==${SMG_VERSION}"

usage() {
  sed -n '7,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

cmd_ensure() {
  ensure_state_dir
  mkdir -p "${DIR}"
  if [[ ! -x "${PY}" || "$(cat "${STAMP}" 2>/dev/null)" != "${WANT}" ]]; then
    command -v python3 >/dev/null 2>&1 || die "python3 is needed"
    log "virtual environment with ${WANT} in ${VENV} (PyPI, about a minute once)"
    rm -rf "${VENV}"
    python3 -m venv "${VENV}"
    # shellcheck disable=SC2086  # two requirement specifiers, split on purpose
    "${PY}" -m pip install -q --disable-pip-version-check ${WANT} >"${DIR}/install.log" 2>&1 ||
      { tail -30 "${DIR}/install.log" >&2; die "installing ${WANT} failed (${DIR}/install.log)"; }
    echo "${WANT}" >"${STAMP}"
  fi
  if [[ ! -f "${SHIM}" || "${SHIM_SRC}" -nt "${SHIM}" ]]; then
    command -v gcc >/dev/null 2>&1 || die "gcc is needed to build the TCP_NODELAY shim"
    gcc -shared -fPIC -O2 -Wall -o "${SHIM}.tmp" "${SHIM_SRC}" -ldl || die "building ${SHIM} failed"
    mv "${SHIM}.tmp" "${SHIM}"
  fi
  log "python: ${PY}"
  log "tcp-nodelay shim: ${SHIM}"
}

cmd_status() {
  [[ -x "${PY}" && -f "${SHIM}" && "$(cat "${STAMP}" 2>/dev/null)" == "${WANT}" ]] ||
    { log "not ready (deploy/local/router-baselines.sh ensure)"; return 1; }
  echo "${PY}"
  echo "${SHIM}"
}

case "${1:-}" in
  ensure) cmd_ensure ;;
  status) cmd_status ;;
  *) usage; exit 2 ;;
esac
