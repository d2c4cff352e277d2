#!/usr/bin/env bash
# Real Docker Compose v2 over podman's Docker-compatible API, for machines without a Docker engine
# (../shared/reference/deploy-testing.md): compose built from its Go module once per machine
# (`go install`, about 90 s, kept in ${ROBUSTRL_GO_DIR:-/var/tmp/robustrl-go}), podman's API service
# started on a socket in podman.sh's state folder if it is not running.
#
# Usage: deploy/compose/compose.sh <compose args…>   e.g. deploy/compose/compose.sh -f deploy/compose/docker-compose.yml config -q
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
COMPOSE_VERSION=v2.29.7
GO_DIR="${ROBUSTRL_GO_DIR:-/var/tmp/robustrl-go}"
COMPOSE="${GO_DIR}/bin/docker-compose-${COMPOSE_VERSION}"
# shellcheck source=../image/podman.sh
source "${ROOT}/deploy/image/podman.sh" --install

if [[ ! -x "${COMPOSE}" ]]; then
  command -v go >/dev/null 2>&1 || { echo "compose.sh: go is needed to build Docker Compose (apt-get install golang)" >&2; exit 1; }
  echo "[compose] building Docker Compose ${COMPOSE_VERSION} from its Go module (once per machine)" >&2
  GOPATH="${GO_DIR}" GOFLAGS=-mod=mod go install "github.com/docker/compose/v2/cmd@${COMPOSE_VERSION}" >&2
  mv "${GO_DIR}/bin/cmd" "${COMPOSE}"
fi

SOCKET="$(dirname "${CONTAINERS_STORAGE_CONF}")/podman.sock"
if ! curl -s --unix-socket "${SOCKET}" http://d/_ping >/dev/null 2>&1; then
  echo "[compose] starting podman's API service on ${SOCKET}" >&2
  rm -f "${SOCKET}"
  setsid podman system service --time=0 "unix://${SOCKET}" >"$(dirname "${SOCKET}")/podman-service.log" 2>&1 </dev/null &
  for _ in $(seq 1 50); do curl -s --unix-socket "${SOCKET}" http://d/_ping >/dev/null 2>&1 && break; sleep 0.1; done
fi
export DOCKER_HOST="unix://${SOCKET}"
exec "${COMPOSE}" "$@"
