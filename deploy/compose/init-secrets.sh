#!/usr/bin/env bash
# Create what deploy/compose/docker-compose.yml reads. Each piece is made once and kept if present
# (--force makes all of them anew; then `docker compose down -v`: the broker's logins are written into
# its storage when it is first formatted):
#   secrets/identity-secret        the control plane's identity secret (signs records, derives every key)
#   secrets/operator-token         your bearer token for the services' APIs (ETTR, jobs, trajectories)
#   secrets/prometheus-token       Prometheus's bearer token for /metrics
#   secrets/http-tokens            both tokens, one per line: what the services accept
#   secrets/controller-command-secret  the controller's own: seeds the key its commands are signed with
#   secrets/controller-public-key  what agents check commands with (from the command secret)
#   secrets/control-plane-public-key  what agents check a retirement, a release or a probe with
#   secrets/machines/<machine>     each demo machine's key (robustrl identity machine-key <machine>)
#   secrets/roles/<machine>        each demo trainer's role certificate (robustrl identity role-certificate <machine> trainer)
#   secrets/kafka/ca.crt           the CA clients verify the broker with (secrets/kafka-ca.key signs; kept off every container)
#   secrets/kafka/broker.p12       the broker's TLS key and certificate (DNS name kafka), broker.password its password
#   secrets/kafka/logins/<name>    the password of each broker login: admin, each service, operator, agent-<machine>
#   .env                           POSTGRES_PASSWORD (compose reads it)
# Keys are derived with the robustrl CLI of this checkout (built), or of the image (ROBUSTRL_IMAGE);
# certificates with openssl.
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${DIR}/../.." && pwd)"
S="${DIR}/secrets"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1
DEMO_MACHINES=(demo-trainer-0 demo-rollout-0 demo-rollout-1)
DEMO_TRAINERS=(demo-trainer-0)
KAFKA_LOGINS=(admin detector controller request-manager rollout-manager weight-registry operator "${DEMO_MACHINES[@]/#/agent-}")

random() { head -c 32 /dev/urandom | base64 | tr -d '/+=\n' | head -c 43; }
robustrl() {
  if [[ -f "${ROOT}/cli/dist/main.js" ]]; then node "${ROOT}/cli/bin/robustrl.js" "$@"
  else docker run --rm -e ROBUSTRL_IDENTITY_SECRET -e ROBUSTRL_CONTROLLER_COMMAND_SECRET "${ROBUSTRL_IMAGE:-robustrl:dev}" robustrl "$@"; fi
}
missing() { [[ ${FORCE} == 1 || ! -s "$1" ]]; }
made=()

umask 077
mkdir -p "${S}/machines" "${S}/kafka/logins"
chmod 700 "${S}"

if missing "${S}/identity-secret"; then
  random >"${S}/identity-secret"
  made+=(identity-secret)
fi
export ROBUSTRL_IDENTITY_SECRET="$(tr -d '\n' <"${S}/identity-secret")"
for token in operator-token prometheus-token; do missing "${S}/${token}" && random >"${S}/${token}" && made+=("${token}"); done
{ echo "# operator"; cat "${S}/operator-token"; echo; echo "# prometheus"; cat "${S}/prometheus-token"; echo; } >"${S}/http-tokens"
missing "${S}/controller-command-secret" && random >"${S}/controller-command-secret" && made+=(controller-command-secret)
if missing "${S}/controller-public-key" || [[ " ${made[*]} " == *" controller-command-secret "* ]]; then
  ROBUSTRL_CONTROLLER_COMMAND_SECRET="$(tr -d '\n' <"${S}/controller-command-secret")" robustrl identity controller-public-key >"${S}/controller-public-key"
  made+=(controller-public-key)
fi
if missing "${S}/control-plane-public-key" || [[ " ${made[*]} " == *" identity-secret "* ]]; then
  robustrl identity control-plane-public-key >"${S}/control-plane-public-key"
  made+=(control-plane-public-key)
fi
for m in "${DEMO_MACHINES[@]}"; do
  if missing "${S}/machines/${m}" || [[ " ${made[*]} " == *" identity-secret "* ]]; then
    robustrl identity machine-key "${m}" >"${S}/machines/${m}"
    made+=("machines/${m}")
  fi
done
mkdir -p "${S}/roles"
for m in "${DEMO_TRAINERS[@]}"; do
  if missing "${S}/roles/${m}" || [[ " ${made[*]} " == *" identity-secret "* ]]; then
    robustrl identity role-certificate "${m}" trainer >"${S}/roles/${m}"
    made+=("roles/${m}")
  fi
done
missing "${DIR}/.env" && printf 'POSTGRES_PASSWORD=%s\n' "$(random)" >"${DIR}/.env" && made+=(.env)

# Kafka: a CA of this deployment, the broker's certificate for the name the containers reach it by
# (kafka), and a login per client.
if missing "${S}/kafka/broker.p12"; then
  command -v openssl >/dev/null 2>&1 || { echo "[secrets] openssl is needed to make the broker's TLS certificate" >&2; exit 1; }
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' EXIT
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=robustrl compose Kafka CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "${S}/kafka-ca.key" -out "${S}/kafka/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kafka" -keyout "${work}/broker.key" -out "${work}/broker.csr" 2>/dev/null
  printf '%s\n' "subjectAltName=DNS:kafka,DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth,clientAuth" >"${work}/ext"
  openssl x509 -req -in "${work}/broker.csr" -CA "${S}/kafka/ca.crt" -CAkey "${S}/kafka-ca.key" -CAcreateserial \
    -CAserial "${work}/ca.srl" -days 825 -extfile "${work}/ext" -out "${work}/broker.crt" 2>/dev/null
  random >"${S}/kafka/broker.password"
  openssl pkcs12 -export -name broker -in "${work}/broker.crt" -inkey "${work}/broker.key" -certfile "${S}/kafka/ca.crt" \
    -passout "file:${S}/kafka/broker.password" -out "${S}/kafka/broker.p12"
  made+=(kafka/ca.crt kafka/broker.p12)
fi
for login in "${KAFKA_LOGINS[@]}"; do missing "${S}/kafka/logins/${login}" && random >"${S}/kafka/logins/${login}" && made+=("kafka/logins/${login}"); done

# The containers run as other users (robustrl 10001, Kafka 1000, Prometheus 65534) and read the files
# through bind mounts: readable files in directories only root can list — except secrets/kafka, which
# the broker mounts whole (it holds no key but its own, and the logins it checks).
find "${S}" -type f ! -name kafka-ca.key -exec chmod 644 {} +
chmod 600 "${S}/kafka-ca.key"
chmod 700 "${S}" "${S}/machines"
chmod 755 "${S}/kafka" "${S}/kafka/logins"
if ((${#made[@]} == 0)); then
  echo "[secrets] ${S} is complete (use --force to make new ones)" >&2
else
  echo "[secrets] made ${made[*]} in ${S} and ${DIR}; your API token: ${S}/operator-token" >&2
fi
