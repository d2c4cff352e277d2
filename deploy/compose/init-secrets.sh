#!/usr/bin/env bash
# Create what deploy/compose/docker-compose.yml reads, once (kept if present; --force makes new ones):
#   secrets/identity-secret        the control plane's identity secret (signs records, derives every key)
#   secrets/operator-token         your bearer token for the services' APIs (ETTR, jobs, trajectories)
#   secrets/prometheus-token       Prometheus's bearer token for /metrics
#   secrets/http-tokens            both tokens, one per line: what the services accept
#   secrets/controller-public-key  what agents check commands with
#   secrets/machines/<machine>     each demo machine's key (robustrl identity machine-key <machine>)
#   .env                           POSTGRES_PASSWORD (compose reads it)
# Keys are derived with the robustrl CLI of this checkout (built), or of the image (ROBUSTRL_IMAGE).
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${DIR}/../.." && pwd)"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1
DEMO_MACHINES=(demo-trainer-0 demo-rollout-0 demo-rollout-1)

if [[ -f "${DIR}/secrets/identity-secret" && ${FORCE} == 0 ]]; then
  echo "[secrets] ${DIR}/secrets exists (use --force to make new ones)" >&2
  exit 0
fi
random() { head -c 32 /dev/urandom | base64 | tr -d '/+=\n' | head -c 43; }
robustrl() {
  if [[ -f "${ROOT}/cli/dist/main.js" ]]; then node "${ROOT}/cli/bin/robustrl.js" "$@"
  else docker run --rm -e ROBUSTRL_IDENTITY_SECRET "${ROBUSTRL_IMAGE:-robustrl:dev}" robustrl "$@"; fi
}
umask 077
mkdir -p "${DIR}/secrets/machines"
chmod 700 "${DIR}/secrets"
export ROBUSTRL_IDENTITY_SECRET="$(random)"
printf '%s\n' "${ROBUSTRL_IDENTITY_SECRET}" >"${DIR}/secrets/identity-secret"
random >"${DIR}/secrets/operator-token"
random >"${DIR}/secrets/prometheus-token"
{ echo "# operator"; cat "${DIR}/secrets/operator-token"; echo; echo "# prometheus"; cat "${DIR}/secrets/prometheus-token"; echo; } >"${DIR}/secrets/http-tokens"
robustrl identity controller-public-key >"${DIR}/secrets/controller-public-key"
for m in "${DEMO_MACHINES[@]}"; do robustrl identity machine-key "${m}" >"${DIR}/secrets/machines/${m}"; done
printf 'POSTGRES_PASSWORD=%s\n' "$(random)" >"${DIR}/.env"
# The containers run as other users (robustrl 10001, Prometheus 65534) and read the files through
# their bind mounts: readable files in a directory only root can list.
chmod 644 "${DIR}"/secrets/* "${DIR}"/secrets/machines/* 2>/dev/null || true
chmod 700 "${DIR}/secrets" "${DIR}/secrets/machines"
echo "[secrets] written to ${DIR}/secrets and ${DIR}/.env; your API token: ${DIR}/secrets/operator-token" >&2
