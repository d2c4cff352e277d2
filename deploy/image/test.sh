#!/usr/bin/env bash
# The container tier of the deploy tests (npm run test:deploy): builds the image on a local base with
# podman (installed from Debian if missing) and checks it as users run it. One line per check; exits
# non-zero on the first failure. About 2 minutes on a fresh machine, seconds once the base is built.
set -euo pipefail
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TAG=localhost/robustrl:test
# shellcheck source=podman.sh
source "${SCRIPT_DIR}/podman.sh" --install
bash "${SCRIPT_DIR}/local-base.sh" localhost/robustrl-base:bookworm
bash "${SCRIPT_DIR}/build.sh" --base localhost/robustrl-base:bookworm --no-apt --engine podman --tag "${TAG}"

pass() { echo "PASS image: $*"; }
fail() { echo "FAIL image: $*"; exit 1; }
NAME="robustrl-image-test-$$"
cleanup() { podman rm -f "${NAME}" >/dev/null 2>&1 || true; }
trap cleanup EXIT

rc=0; podman run --rm "${TAG}" no-such-process >/dev/null 2>&1 || rc=$?
[[ ${rc} == 64 ]] && pass "an unknown process exits 64 with the list" || fail "unknown process: exit ${rc}, expected 64"

uid="$(podman run --rm --entrypoint id "${TAG}" -u)"
[[ "${uid}" == 10001 ]] && pass "runs as uid 10001, not root" || fail "runs as uid ${uid}"

out="$(podman run --rm -e ROBUSTRL_STEPS=2 -e ROBUSTRL_SPEEDUP=600 "${TAG}" 2>&1)" || fail "the embedded main job failed: ${out: -2000}"
grep -q 'done in' <<<"${out}" && pass "the main job runs on embedded defaults ($(grep -o 'done in [0-9.]* s' <<<"${out}"))" || fail "no report from the main job"

out="$(podman run --rm "${TAG}" detector 2>&1)" && fail "the detector started on 0.0.0.0 without a token"
[[ "$(wc -l <<<"${out}")" == 1 ]] && grep -q 'without a token' <<<"${out}" && pass "a service without a token refuses to start, in one line" || fail "unexpected refusal: ${out}"

TOKEN="image-test-token-$$-0123456789"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
podman run -d --name "${NAME}" -e ROBUSTRL_HTTP_TOKENS="${TOKEN}" -p "127.0.0.1:${PORT}:8083" "${TAG}" request-manager >/dev/null
for _ in $(seq 1 60); do
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORT}/healthz" || true)" == 200 ]] && break
  sleep 0.5
done
[[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORT}/healthz")" == 200 ]] && pass "the request manager answers /healthz from outside the container" || fail "no /healthz"
code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORT}/v1/trajectories/t-1")"
[[ "${code}" == 401 ]] && pass "its API answers 401 without the token" || fail "API without token: ${code}"
code="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${TOKEN}" "http://127.0.0.1:${PORT}/v1/trajectories/t-1")"
[[ "${code}" == 404 ]] && pass "and serves with it (404: no such trajectory)" || fail "API with token: ${code}"

start=${SECONDS}
podman stop -t 20 "${NAME}" >/dev/null
took=$((SECONDS - start))
code="$(podman inspect "${NAME}" --format '{{.State.ExitCode}}')"
logs="$(podman logs "${NAME}" 2>&1)"
[[ "${code}" == 0 && ${took} -lt 10 ]] && grep -q 'nothing left in flight' <<<"${logs}" &&
  pass "SIGTERM drains it: exit 0 in ${took} s" || fail "SIGTERM: exit ${code} after ${took} s; logs: ${logs: -1000}"
