#!/usr/bin/env bash
# A local base image for builds with no network inside the container: Debian bookworm (minbase, from
# the Debian mirror by mmdebstrap) with libucx0 and this machine's Node 20 binary — what
# docker.io/library/node:20-bookworm-slim plus `apt-get install libucx0` gives users.
#
# Usage: deploy/image/local-base.sh [TAG]    (default localhost/robustrl-base:bookworm; kept once built)
set -euo pipefail
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TAG="${1:-localhost/robustrl-base:bookworm}"
# shellcheck source=podman.sh
source "${SCRIPT_DIR}/podman.sh" --install

if podman image exists "${TAG}"; then
  echo "[base] ${TAG} exists" >&2
  exit 0
fi
NODE_BIN="$(command -v node)"
[[ "$(${NODE_BIN} -p 'process.versions.node.split(".")[0]')" == 20 ]] || echo "[base] warning: ${NODE_BIN} is not Node 20" >&2
WORK="$(mktemp -d "${TMPDIR:-/tmp}/robustrl-base.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
echo "[base] mmdebstrap bookworm (minbase + libucx0, ca-certificates)" >&2
mmdebstrap --quiet --variant=minbase --include=libucx0,ca-certificates bookworm "${WORK}/rootfs" >&2
install -m 0755 "${NODE_BIN}" "${WORK}/rootfs/usr/local/bin/node"
echo "[base] podman import → ${TAG}" >&2
tar -C "${WORK}/rootfs" -c . | podman import --change 'CMD ["node"]' - "${TAG}" >&2
echo "[base] built ${TAG}" >&2
