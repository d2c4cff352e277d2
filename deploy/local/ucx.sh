#!/usr/bin/env bash
# UCX for the native weight-transfer module (native/ucx), from Debian packages.
#
# Usage: deploy/local/ucx.sh <install|ensure|status>
#   install  apt-get install libucx-dev (headers + libs, CPU transports tcp/posix/sysv/cma) and ucx-utils
#            (ucx_info, ucx_perftest) when missing
#   ensure   install, then rebuild the addon if the built one is not the real UCX build (the npm install
#            hook builds a stub when UCX is absent); `npm test` runs this first
#   status   prints the UCX version and whether the built addon is available; exit 0 only if it is
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG="ucx"
# shellcheck source=lib/common.sh source-path=SCRIPTDIR
source "${SCRIPT_DIR}/lib/common.sh"

ADDON_DIR="${REPO_ROOT}/native/ucx"

usage() {
  sed -n '4,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

have_ucx() { pkg-config --exists ucx 2>/dev/null && command -v ucx_perftest >/dev/null 2>&1; }

# The built addon's info() as one JSON line ({available, version, reason, ...}).
addon_info() {
  node -e '
    try { console.log(JSON.stringify(require(process.argv[1]).info())); }
    catch (e) { console.log(JSON.stringify({ available: false, reason: "addon not loadable: " + e.message })); }' \
    "${ADDON_DIR}/build/Release/ucx.node"
}

cmd_install() {
  if have_ucx; then
    log "UCX $(pkg-config --modversion ucx) found"
    return 0
  fi
  log "UCX not found; installing Debian packages libucx-dev ucx-utils"
  command -v apt-get >/dev/null 2>&1 || die "apt-get not available; install UCX (>= 1.13, with its pkg-config file) manually"
  can_be_root || die "need root or sudo to apt-get install libucx-dev ucx-utils"
  apt_install libucx-dev ucx-utils pkg-config || die "apt-get install libucx-dev ucx-utils failed"
  have_ucx || die "libucx-dev installed but pkg-config cannot find ucx"
  log "UCX $(pkg-config --modversion ucx) installed"
}

cmd_ensure() {
  cmd_install
  if addon_info | grep -q '"available":true'; then
    log "addon available: $(addon_info)"
    return 0
  fi
  log "rebuilding the addon against UCX (native/ucx)"
  (cd "${ADDON_DIR}" && node scripts/build-addon.js)
  addon_info | grep -q '"available":true' || die "addon still unavailable after rebuild: $(addon_info)"
  log "addon available: $(addon_info)"
}

cmd_status() {
  if have_ucx; then echo "ucx: $(pkg-config --modversion ucx)"; else echo "ucx: not installed"; fi
  local info
  info="$(addon_info)"
  echo "addon: ${info}"
  grep -q '"available":true' <<<"${info}"
}

case "${1:-}" in
  install) cmd_install ;;
  ensure) cmd_ensure ;;
  status) cmd_status ;;
  -h | --help | help) usage ;;
  *)
    usage
    exit 2
    ;;
esac
