#!/usr/bin/env bash
# Build the robustrl image from this checkout: the app is built here (tsc, the native UCX module as
# `npm install` built it), staged with its production dependencies, and COPYed into Containerfile —
# so the build itself downloads nothing but what the base's package manager fetches (libucx0), and
# nothing at all with --no-apt on a base that has it.
#
# Usage: deploy/image/build.sh [--tag T] [--base IMAGE] [--no-apt] [--engine podman|docker] [--stage-only DIR]
#   --tag T          image tag (default robustrl:dev)
#   --base IMAGE     base image with Node 20 (default docker.io/library/node:20-bookworm-slim)
#   --no-apt         the base already has libucx0: do not run apt-get in the build
#   --engine E       podman or docker (default: podman if installed, else docker)
#   --stage-only DIR stage the app into DIR/app (the build context) and stop
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${SCRIPT_DIR}/../.." && pwd)"
TAG=robustrl:dev
BASE=docker.io/library/node:20-bookworm-slim
INSTALL_UCX=1
ENGINE=""
STAGE_ONLY=""

die() { echo "build.sh: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tag) TAG="${2:?--tag needs a value}"; shift 2 ;;
    --base) BASE="${2:?--base needs a value}"; shift 2 ;;
    --no-apt) INSTALL_UCX=0; shift ;;
    --engine) ENGINE="${2:?--engine needs podman or docker}"; shift 2 ;;
    --stage-only) STAGE_ONLY="${2:?--stage-only needs a directory}"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

log() { echo "[image] $*" >&2; }

stage() {
  local context="$1" app="$1/app" ws dir
  rm -rf "${app}"
  mkdir -p "${app}"
  log "building the app (tsc -b)"
  (cd "${ROOT}" && npx tsc -b tsconfig.build.json)
  [[ -f "${ROOT}/native/ucx/build/Release/ucx.node" ]] || die "native/ucx/build/Release/ucx.node is missing: run npm install (it builds the UCX module against libucx-dev)"
  cp "${ROOT}/package.json" "${ROOT}/package-lock.json" "${app}/"
  # Every workspace's package.json (npm ci checks them against the lock), and what runs: dist/ (+ the CLI's bin).
  while IFS= read -r ws; do
    for dir in ${ROOT}/${ws}; do
      [[ -f "${dir}/package.json" ]] || continue
      local rel="${dir#"${ROOT}/"}"
      mkdir -p "${app}/${rel}"
      cp "${dir}/package.json" "${app}/${rel}/"
      [[ "${rel}" == bench || "${rel}" == libs/harness ]] && continue # benchmarks and the test harness are not shipped
      [[ -d "${dir}/dist" ]] && cp -r "${dir}/dist" "${app}/${rel}/"
      [[ -d "${dir}/bin" ]] && cp -r "${dir}/bin" "${app}/${rel}/"
    done
  done < <(node -e 'for (const w of require(process.argv[1]).workspaces) console.log(w)' "${ROOT}/package.json")
  mkdir -p "${app}/native/ucx/build/Release"
  cp "${ROOT}/native/ucx/build/Release/ucx.node" "${app}/native/ucx/build/Release/"
  find "${app}" -name '*.tsbuildinfo' -delete
  find "${app}" \( -name '*.spec.js' -o -name '*.spec.d.ts' -o -name '*.spec.js.map' -o -name '*.spec.d.ts.map' \) -delete
  log "installing production dependencies (npm ci --omit=dev, from the npm cache where it can)"
  (cd "${app}" && npm ci --omit=dev --ignore-scripts --prefer-offline --no-audit --no-fund --loglevel=error >&2)
  cp "${SCRIPT_DIR}/entrypoint.js" "${app}/"
  # The stand-in framework of the compose demo's emulated machines.
  mkdir -p "${app}/demo"
  cp "${ROOT}/deploy/demo/emulated-role.js" "${app}/demo/"
  cp "${SCRIPT_DIR}/Containerfile" "${context}/"
  log "staged $(du -sh "${app}" | cut -f1) in ${app}"
}

if [[ -n "${STAGE_ONLY}" ]]; then
  mkdir -p "${STAGE_ONLY}"
  stage "$(cd "${STAGE_ONLY}" && pwd)"
  exit 0
fi

if [[ -z "${ENGINE}" ]]; then
  if command -v podman >/dev/null 2>&1; then ENGINE=podman; elif command -v docker >/dev/null 2>&1; then ENGINE=docker; else die "neither podman nor docker is installed"; fi
fi
# Our podman settings and image store (podman.sh): the local base lives there.
# shellcheck source=podman.sh
[[ "${ENGINE}" == podman ]] && source "${SCRIPT_DIR}/podman.sh" --env
CONTEXT="$(mktemp -d "${TMPDIR:-/tmp}/robustrl-image.XXXXXX")"
trap 'rm -rf "${CONTEXT}"' EXIT
stage "${CONTEXT}"
log "${ENGINE} build -t ${TAG} (FROM ${BASE})"
"${ENGINE}" build -f "${CONTEXT}/Containerfile" --build-arg "BASE=${BASE}" --build-arg "INSTALL_UCX=${INSTALL_UCX}" -t "${TAG}" "${CONTEXT}" >&2
log "built ${TAG}"
