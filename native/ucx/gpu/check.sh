#!/usr/bin/env bash
# The GPU data plane on a GPU machine with no network, from the repo root of a checkout:
#
#   bash native/ucx/gpu/check.sh            # after native/ucx/gpu/bundle.sh filled .gpu/ elsewhere
#
# Needs what ../shared/reference/gpu-offline-build.md says to bring (.gpu/node.xz, ucx.tar.xz,
# nodehdr.tar.xz, nm.tar.xz and native/ucx/dist/), .gpu/gpu-pull.cjs from bundle.sh for the agent-level
# part, and on the machine: an NVIDIA driver, g++/make/pkg-config, python3 with PyTorch (CUDA).
# Steps: unpack Node and the CUDA-enabled UCX; build the addon against that UCX (ROBUSTRL_UCX_PREFIX);
# the module's CUDA tests (gpu/cuda.test.mjs: IPC import, device GET/PUT byte-exact and not emulated, a
# peer killed mid-transfer); NVML; two agents pulling a multi-bucket version device to device from
# buffers a PyTorch process exported, and the benchmark against ucx_perftest and a device copy
# (bench/src/gpu-pull.ts). Prints one `RESULT <name> PASS|FAIL|SKIP <detail>` line per result and
# `BENCH` lines; exits 1 if any result failed, 2 if there is no GPU to check on.
set -uo pipefail
cd "$(dirname "$0")/../../.."
REPO=$PWD
B="${ROBUSTRL_GPU_BUNDLE:-$REPO/.gpu}"
failed=0
result() {
  echo "RESULT $1 $2 ${3:-}"
  if [ "$2" = FAIL ]; then failed=1; fi
}
finish() {
  echo "check.sh: $( [ "$failed" = 0 ] && echo 'every result passed or was skipped' || echo 'FAILED' )" >&2
  exit "$failed"
}

# ── the GPU ─────────────────────────────────────────────────────────────────────────────────────────
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  result gpu SKIP "no NVIDIA GPU visible (nvidia-smi -L failed): nothing to check here"
  exit 2
fi
result gpu PASS "$(nvidia-smi -L | head -1)"

# ── Node and UCX, unpacked (gpu-offline-build.md section 2) ─────────────────────────────────────────
for f in node.xz ucx.tar.xz nodehdr.tar.xz nm.tar.xz; do
  if [ ! -f "$B/$f" ]; then
    result bundle FAIL "missing $B/$f: run bash native/ucx/gpu/bundle.sh where the registries are reachable and carry .gpu/"
    finish
  fi
done
if [ ! -f native/ucx/dist/ucx.js ]; then
  result bundle FAIL "missing native/ucx/dist/ucx.js: build it (npx tsc -b tsconfig.build.json) where TypeScript is installed and carry it"
  finish
fi
W=$(mktemp -d)
trap 'rm -rf "$W"; rm -f "$REPO/native/ucx/node_modules.gpu-check"' EXIT
mkdir -p "$W/node/bin" "$W/ucx"
xz -dc "$B/node.xz" > "$W/node/bin/node" && chmod +x "$W/node/bin/node"
tar -xJf "$B/nodehdr.tar.xz" -C "$W/node" && tar -xJf "$B/ucx.tar.xz" -C "$W/ucx" && tar -xJf "$B/nm.tar.xz" -C "$W"
UCX="$W/ucx/libucx"
export PATH="$W/node/bin:$UCX/bin:$PATH" LD_LIBRARY_PATH="$UCX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ROBUSTRL_UCX_PREFIX="$UCX"
result bundle PASS "node $(node --version), UCX $(sh native/ucx/scripts/ucx-config.sh version) from the wheel"

# ── the addon against that UCX ──────────────────────────────────────────────────────────────────────
# node-gyp and node-addon-api from the bundle (a checkout's own node_modules, if any, is left alone).
if [ ! -e native/ucx/node_modules ]; then ln -s "$W/node_modules" native/ucx/node_modules && touch native/ucx/node_modules.gpu-check; fi
(cd native/ucx && node scripts/build-addon.js) 2>&1 | sed 's/^/  /' >&2
info=$(node -e "const i=require('./native/ucx/dist/ucx.js'); console.log(JSON.stringify({...i.ucxInfo(), cuda: i.cuda.info()}))")
if [ -e native/ucx/node_modules.gpu-check ]; then rm -f native/ucx/node_modules native/ucx/node_modules.gpu-check; fi
echo "$info" | node -e '
  const i = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const ok = i.available && i.cudaSupported && i.cuda.available;
  console.log(`RESULT build ${ok ? "PASS" : "FAIL"} UCX ${i.version} cudaSupported=${i.cudaSupported}, CUDA driver ${i.cuda.driverVersion} with ${i.cuda.devices.length} device(s)${ok ? "" : ": " + (i.reason ?? i.cuda.reason ?? "UCX without CUDA support")}`);
  process.exit(ok ? 0 : 1);' || { failed=1; finish; }

# ── the module's CUDA tests ─────────────────────────────────────────────────────────────────────────
node --test --test-concurrency=1 --test-reporter=tap native/ucx/gpu/cuda.test.mjs > "$W/module.tap" 2>&1
module_status=$?
# node --test escapes a diagnostic's own '#' (console.log('# GET ...') arrives as '# \# GET ...').
grep -E '^# (\\# )?(GET|[0-9]+ GETs)' "$W/module.tap" | sed -E 's/^# (\\# )?/  /' >&2
node -e '
  const tap = require("fs").readFileSync(process.argv[1], "utf8").split("\n");
  let failed = 0;
  for (const l of tap) {
    const m = /^(not ok|ok) \d+ - (.*?)( # SKIP(?: (.*))?)?$/.exec(l);
    if (!m) continue;
    const outcome = m[1] !== "ok" ? "FAIL" : m[3] !== undefined ? "SKIP" : "PASS";
    if (outcome === "FAIL") failed = 1;
    console.log(`RESULT module: ${m[2]} ${outcome}${m[4] ? " " + m[4] : ""}`);
  }
  process.exit(failed);' "$W/module.tap" || failed=1
if [ "$module_status" != 0 ]; then
  result module FAIL "node --test exited with $module_status; the TAP output:"
  sed 's/^/  /' "$W/module.tap" | tail -40 >&2
fi

# ── NVML ────────────────────────────────────────────────────────────────────────────────────────────
node -e '
  const { nvmlSample } = require("./native/ucx/dist/ucx.js");
  nvmlSample();
  setTimeout(() => {
    const s = nvmlSample();
    const d = s.devices[0];
    const ok = s.available && d && typeof d.gpuUtilization === "number";
    console.log(`RESULT nvml ${ok ? "PASS" : "FAIL"} ${ok ? `GPU 0 ${d.uuid}: utilization ${d.gpuUtilization}%, tensor activity ${d.tensorActive === null ? "n/a (" + d.tensorActiveReason + ")" : d.tensorActive.toFixed(1) + "%"}` : s.reason ?? JSON.stringify(d)}`);
    process.exit(ok ? 0 : 1);
  }, 1000);' || failed=1

# ── two agents, PyTorch buffers, the benchmark ──────────────────────────────────────────────────────
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  result agent-pull FAIL "python3 with a CUDA-enabled PyTorch is needed for the agent-level pull (import torch; torch.cuda.is_available())"
elif [ ! -f "$B/gpu-pull.cjs" ]; then
  result agent-pull FAIL "missing $B/gpu-pull.cjs (the agent-level check): run bash native/ucx/gpu/bundle.sh where the registries are reachable and carry .gpu/"
else
  ROBUSTRL_REPO="$REPO" ROBUSTRL_UCX_ADDON="$REPO/native/ucx/build/Release/ucx.node" \
    node "$B/gpu-pull.cjs" --exporter torch ${GPU_PULL_ARGS:-} 2> "$W/agent.log" | grep -E '^(RESULT|BENCH) '
  status=${PIPESTATUS[0]}
  if [ "$status" != 0 ]; then
    failed=1
    echo "  the agents' log (last 40 lines):" >&2
    tail -40 "$W/agent.log" | sed 's/^/  /' >&2
  fi
fi
finish
