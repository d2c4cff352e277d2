#!/usr/bin/env bash
# Prepares what gpu/check.sh needs on a GPU machine without network, on a machine with the package
# registries and this checkout's `npm install` done. From the repo root:
#
#   bash native/ucx/gpu/bundle.sh          # fills .gpu/ (ignored by git) and builds native/ucx/dist/
#
# It is ../shared/reference/gpu-offline-build.md section 1 (Node, the libucx-cu13 wheel's UCX trimmed
# to fit the transfer limit, Node's headers, node-gyp and node-addon-api), plus .gpu/gpu-pull.cjs: the
# agent-level check and benchmark (bench/src/gpu-pull.ts) bundled with its dependencies, since the GPU
# machine has neither node_modules nor a TypeScript compiler. Carry .gpu/ and native/ucx/dist/ along.
# ROBUSTRL_UCX_WHEEL=libucx-cu12==1.22.0 picks the CUDA 12 build (CUDA 12 drivers).
set -euo pipefail
cd "$(dirname "$0")/../../.."
WHEEL="${ROBUSTRL_UCX_WHEEL:-libucx-cu13==1.22.0}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p .gpu
say() { printf '[gpu/bundle] %s\n' "$*" >&2; }

say "node $(node --version) -> .gpu/node.xz"
xz -T2 -6 -c "$(readlink -f "$(command -v node)")" > .gpu/node.xz

say "$WHEEL -> .gpu/ucx.tar.xz"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d "$T/whl" "$WHEEL"
python3 -c 'import zipfile,sys,glob; zipfile.ZipFile(glob.glob(sys.argv[1])[0]).extractall(sys.argv[2])' "$T/whl/*.whl" "$T/x"
mkdir -p "$T/t/libucx/bin" "$T/t/libucx/lib/ucx"
(
  cd "$T/x"
  cp -a libucx_cu1*.libs "$T/t/"
  cp -a libucx/include libucx/etc libucx/share "$T/t/libucx/"
  cp -a libucx/lib/pkgconfig "$T/t/libucx/lib/"
  cp libucx/bin/ucx_info libucx/bin/ucx_perftest "$T/t/libucx/bin/"
  chmod 755 "$T/t/libucx/bin/"*
  # The wheel stores every .so three times (no links in a zip): keep one, link the other names.
  for d in lib lib/ucx; do
    for f in libucx/$d/*.so.0.0.0; do
      b=$(basename "$f" .so.0.0.0)
      cp "$f" "$T/t/libucx/$d/"
      ln -s "$b.so.0.0.0" "$T/t/libucx/$d/$b.so.0"
      ln -s "$b.so.0" "$T/t/libucx/$d/$b.so"
    done
  done
)
tar -cJf .gpu/ucx.tar.xz -C "$T/t" .

say "Node headers -> .gpu/nodehdr.tar.xz"
NODE_INC="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")/include/node"
mkdir -p "$T/h/include/node"
(cd "$NODE_INC" && cp -r common.gypi config.gypi node_api.h node_api_types.h js_native_api.h js_native_api_types.h node_version.h uv.h uv "$T/h/include/node/")
tar -cJf .gpu/nodehdr.tar.xz -C "$T/h" include

say "node-gyp, node-addon-api -> .gpu/nm.tar.xz"
npm install -s --prefix "$T/nm" --no-audit --no-fund node-gyp@11.2.0 node-addon-api@8.5.0
tar -cJf .gpu/nm.tar.xz -C "$T/nm" node_modules

say "build (native/ucx/dist, bench/dist) and bundle the agent-level check -> .gpu/gpu-pull.cjs"
npx tsc -b tsconfig.build.json
# NestJS loads these optional packages only when asked; the weight plane never asks.
npx esbuild bench/dist/gpu-pull.js --bundle --platform=node --target=node20 --format=cjs --log-level=warning \
  --external:@nestjs/microservices --external:@nestjs/websockets --external:@nestjs/platform-express \
  --external:class-transformer --external:class-validator --outfile=.gpu/gpu-pull.cjs
du -ch .gpu/* native/ucx/dist | tail -1 | sed 's/^/[gpu\/bundle] carry .gpu\/ and native\/ucx\/dist\/: /' >&2
