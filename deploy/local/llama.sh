#!/usr/bin/env bash
# A real inference engine on a CPU machine: llama.cpp's own server, built from the source
# that PyPI's llama-cpp-python sdist carries (vendor/llama.cpp; no other download), and a tiny
# random-weight model written with PyPI's `gguf` package (llama/make-tiny-model.py, 25 MB).
#
# Usage: deploy/local/llama.sh <ensure|status|serve PORT>
#   ensure   build llama-server and write the model into ${ROBUSTRL_LOCAL_DIR:-.local}/llama (cached; ~3 min first time)
#   status   prints the server binary and model paths; exit 0 only if both exist
#   serve    runs llama-server on 127.0.0.1:PORT with the tiny model, 4 slots, in the foreground
#
# The integration tests' global setup runs `ensure`; test/e2e/real-engine.int.spec.ts runs the engines.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG="llama"
# shellcheck source=lib/common.sh source-path=SCRIPTDIR
source "${SCRIPT_DIR}/lib/common.sh"

VERSION="${ROBUSTRL_LLAMA_CPP_PYTHON_VERSION:-0.3.16}"
DIR="${STATE_DIR}/llama"
SERVER="${DIR}/llama.cpp-${VERSION}/build/bin/llama-server"
# Width 384, 4 layers: about 1.5 ms a token on one thread, slow enough for a kill to land mid-stream.
MODEL="${DIR}/tiny-ascii-384.gguf"

usage() {
  sed -n '6,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

cmd_ensure() {
  mkdir -p "${DIR}"
  if [[ ! -x "${DIR}/venv/bin/python" ]]; then
    log "python venv with gguf and numpy"
    python3 -m venv "${DIR}/venv"
    "${DIR}/venv/bin/pip" install -q gguf numpy
  fi
  if [[ ! -x "${SERVER}" ]]; then
    command -v cmake >/dev/null 2>&1 || die "cmake is needed to build llama-server"
    log "llama-server from llama-cpp-python ${VERSION}'s sdist (about 3 min on 2 cores)"
    local tmp
    tmp="$(mktemp -d)"
    "${DIR}/venv/bin/pip" download -q --no-deps --no-binary :all: "llama-cpp-python==${VERSION}" -d "${tmp}"
    tar -xzf "${tmp}"/llama_cpp_python-*.tar.gz -C "${tmp}"
    rm -rf "${DIR}/llama.cpp-${VERSION}"
    mv "${tmp}"/llama_cpp_python-*/vendor/llama.cpp "${DIR}/llama.cpp-${VERSION}"
    rm -rf "${tmp}"
    # The compiler's warnings go to build.log; it is shown when the build fails.
    cmake -S "${DIR}/llama.cpp-${VERSION}" -B "${DIR}/llama.cpp-${VERSION}/build" -DCMAKE_BUILD_TYPE=Release \
      -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >"${DIR}/build.log" 2>&1 ||
      { tail -40 "${DIR}/build.log" >&2; die "configuring llama.cpp failed (${DIR}/build.log)"; }
    cmake --build "${DIR}/llama.cpp-${VERSION}/build" --target llama-server -j "$(nproc)" >>"${DIR}/build.log" 2>&1 ||
      { tail -40 "${DIR}/build.log" >&2; die "building llama-server failed (${DIR}/build.log)"; }
  fi
  if [[ ! -f "${MODEL}" ]]; then
    "${DIR}/venv/bin/python" "${SCRIPT_DIR}/llama/make-tiny-model.py" "${MODEL}" 0 384 >/dev/null
  fi
  log "llama-server: ${SERVER}"
  log "model: ${MODEL}"
}

cmd_status() {
  [[ -x "${SERVER}" && -f "${MODEL}" ]] || { log "not built (deploy/local/llama.sh ensure)"; return 1; }
  echo "${SERVER}"
  echo "${MODEL}"
}

cmd_serve() {
  local port="${1:?usage: llama.sh serve PORT}"
  cmd_status >/dev/null || die "run deploy/local/llama.sh ensure first"
  exec "${SERVER}" -m "${MODEL}" --host 127.0.0.1 --port "${port}" -c 2048 -np 4
}

case "${1:-}" in
  ensure) cmd_ensure ;;
  status) cmd_status ;;
  serve) shift; cmd_serve "$@" ;;
  *) usage; exit 2 ;;
esac
