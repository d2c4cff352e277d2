#!/usr/bin/env bash
# podman on machines like ours (no Docker engine, root without CAP_SYS_RESOURCE, cgroup v1 + a v2 mount):
# runc instead of crun, cgroupfs, file events, ulimits within the hard limits we have — found in
# ../shared/reference/deploy-testing.md. State (images, containers) lives in ${ROBUSTRL_PODMAN_DIR:-
# /var/tmp/robustrl-podman}: outside any checkout (a build's layers would be source trees to every tool
# that walks the repo), and shared by clones, so the base image is built once per machine.
#
# Usage: deploy/image/podman.sh <podman args…>     e.g. deploy/image/podman.sh images
#        source deploy/image/podman.sh --env         export CONTAINERS_CONF/CONTAINERS_STORAGE_CONF here
#        deploy/image/podman.sh --install            apt-get the packages if podman is missing
# Strict mode only when run, not when sourced into someone else's shell.
[[ "${BASH_SOURCE[0]}" == "$0" ]] && set -euo pipefail

_STATE="${ROBUSTRL_PODMAN_DIR:-/var/tmp/robustrl-podman}"

_podman_config() {
  mkdir -p "${_STATE}/storage" "${_STATE}/run"
  cat >"${_STATE}/containers.conf" <<CONF
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
CONF
  cat >"${_STATE}/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "${_STATE}/storage"
runroot = "${_STATE}/run"
CONF
  export CONTAINERS_CONF="${_STATE}/containers.conf" CONTAINERS_STORAGE_CONF="${_STATE}/storage.conf"
}

_podman_install() {
  command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && command -v mmdebstrap >/dev/null 2>&1 && return 0
  echo "[podman] installing podman, runc and mmdebstrap from Debian" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends podman buildah conmon netavark aardvark-dns \
    slirp4netns fuse-overlayfs containernetworking-plugins iptables mmdebstrap uidmap catatonit runc >&2
}

case "${1:-}" in
  --env) _podman_config ;;
  --install) _podman_install; _podman_config ;;
  *)
    _podman_config
    exec podman "$@"
    ;;
esac
