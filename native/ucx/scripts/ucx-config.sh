#!/bin/sh
# Used by binding.gyp. `have` prints 1 when UCX is usable (pkg-config finds it and
# ROBUSTRL_UCX_STUB is not 1), else 0. `cflags` / `libs` print pkg-config output or nothing.
case "$1" in
  have)
    if [ "${ROBUSTRL_UCX_STUB:-0}" = "1" ]; then echo 0; exit 0; fi
    if pkg-config --exists ucx 2>/dev/null; then echo 1; else echo 0; fi ;;
  cflags) pkg-config --cflags-only-I ucx 2>/dev/null | sed 's/-I//g' || true ;;
  libs) pkg-config --libs ucx 2>/dev/null || true ;;
  libdirs) pkg-config --libs-only-L ucx 2>/dev/null | sed 's/-L/-Wl,-rpath,/g' || true ;;
esac
