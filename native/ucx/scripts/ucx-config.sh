#!/bin/sh
# Used by binding.gyp and build-addon.js. `have` prints 1 when UCX is usable (pkg-config finds it and
# ROBUSTRL_UCX_STUB is not 1), else 0. `cflags` / `libs` / `libdirs` print pkg-config output or nothing.
#
# Which UCX: the system's (Debian's libucx-dev, no CUDA) by default. ROBUSTRL_UCX_PREFIX=<dir> builds
# against a UCX unpacked elsewhere instead — on GPU machines the libucx-cu13 / libucx-cu12 wheel from
# PyPI, whose libucx/ directory holds include/, lib/ and lib/pkgconfig/ (gpu/check.sh,
# ../shared/reference/gpu-offline-build.md). The wheel's .pc files name the prefix it was built in, so
# pkg-config is told the real one; the addon gets an rpath to its lib/.
if [ -n "${ROBUSTRL_UCX_PREFIX:-}" ]; then
  # Only there: a prefix without UCX must not quietly fall back to the system's.
  PKG_CONFIG_LIBDIR="$ROBUSTRL_UCX_PREFIX/lib/pkgconfig"
  PKG_CONFIG_PATH=""
  export PKG_CONFIG_LIBDIR PKG_CONFIG_PATH
  pc() { pkg-config --define-variable=prefix="$ROBUSTRL_UCX_PREFIX" "$@"; }
else
  pc() { pkg-config "$@"; }
fi
case "$1" in
  have)
    if [ "${ROBUSTRL_UCX_STUB:-0}" = "1" ]; then echo 0; exit 0; fi
    if pc --exists ucx 2>/dev/null; then echo 1; else echo 0; fi ;;
  cflags) pc --cflags-only-I ucx 2>/dev/null | sed 's/-I//g' || true ;;
  libs) pc --libs ucx 2>/dev/null || true ;;
  libdirs) pc --libs-only-L ucx 2>/dev/null | sed 's/-L/-Wl,-rpath,/g' || true ;;
  version) pc --modversion ucx 2>/dev/null || true ;;
esac
