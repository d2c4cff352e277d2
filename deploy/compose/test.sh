#!/usr/bin/env bash
# The compose tier of the deploy tests (npm run test:deploy): real Docker Compose over podman brings up
# deploy/compose/docker-compose.yml with the demo profile — Kafka, PostgreSQL, the five services, three
# emulated machines — and checks that the job recovers from its trainer's crash by a restart in place
# and trains on; then takes it down. Public images are replaced by local stand-ins
# (docker-compose.local.yml), and the observability services are left out (no local images of them).
# One line per check; non-zero exit on the first failure.
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${DIR}/../.." && pwd)"
PROJECT=robustrl-test
export ROBUSTRL_IMAGE=localhost/robustrl:test OTEL_TRACES_EXPORTER=none
compose() { bash "${DIR}/compose.sh" -p "${PROJECT}" -f "${DIR}/docker-compose.yml" -f "${DIR}/docker-compose.local.yml" --profile demo "$@"; }
pass() { echo "PASS compose: $*"; }
fail() {
  echo "FAIL compose: $*"
  compose logs --no-color --tail 40 controller detector demo-trainer-0 2>&1 | tail -80 >&2 || true
  exit 1
}

bash "${ROOT}/deploy/image/local-base.sh" localhost/robustrl-base:bookworm
bash "${ROOT}/deploy/image/build.sh" --base localhost/robustrl-base:bookworm --no-apt --engine podman --tag "${ROBUSTRL_IMAGE}"
bash "${DIR}/local-images/build.sh"
bash "${DIR}/init-secrets.sh"

# The file users run, as they run it: valid for Compose itself, every profile.
bash "${DIR}/compose.sh" -f "${DIR}/docker-compose.yml" --profile demo config -q && pass "docker compose config is clean (demo profile included)" || fail "compose config"

cleanup() { compose down -v --remove-orphans >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
compose up -d >/dev/null 2>&1 || fail "compose up"
pass "the stack is up: $(compose ps --services --status running | sort | tr '\n' ' ')"

story() { compose logs --no-color demo-tail 2>/dev/null || true; }
deadline=$((SECONDS + 240))
until story | grep -q 'RecoveryCompleted .*outcome=recovered'; do
  ((SECONDS < deadline)) || fail "no recovery within 240 s; the story so far: $(story | grep -E ' (verdicts|control) ' | tail -10)"
  sleep 3
done
story | grep -q 'AgentFaultSignalled .*machineId=demo-trainer-0 .*signal=process-exited' && pass "the trainer's crash was reported by its agent" || fail "no crash report"
story | grep -q 'RecoveryDecided .*action=restart-trainer-group' && pass "the controller restarted the trainer in place (no task restart)" || fail "not a trainer restart: $(story | grep RecoveryDecided)"
! story | grep -q ' RestartTask ' && pass "no task restart" || fail "a task restart happened"

crashed_at="$(story | grep -o 'RestartTrainerGroup .* step=[0-9]*' | head -1 | grep -o 'step=[0-9]*' | cut -d= -f2)"
next=$((crashed_at + 1))
until story | grep -q "TrainingStepCompleted .*step=${next} "; do
  ((SECONDS < deadline)) || fail "the job did not train on past step ${crashed_at}"
  sleep 3
done
pass "the job trains on after the restart (step ${next} completed)"

TOKEN="$(cat "${DIR}/secrets/operator-token")"
code="$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8082/v1/jobs)"
[[ "${code}" == 401 ]] && pass "the controller's API answers 401 without the token" || fail "without token: ${code}"
jobs="$(curl -s -H "Authorization: Bearer ${TOKEN}" http://127.0.0.1:8082/v1/jobs)"
grep -q 'demo-job' <<<"${jobs}" && pass "and lists the demo job with it" || fail "jobs: ${jobs}"

# The broker is TLS + SCRAM + ACLs (config/kafka/start.sh): every client above logged in as itself and
# did its part with its role's rights only; an agent's login may not read the verdicts.
! compose logs --no-color detector controller request-manager rollout-manager weight-registry demo-trainer-0 2>/dev/null | grep -qiE 'authori[sz]ation failed|not authorized' &&
  pass "each service and agent worked with its own login, no authorization refused" || fail "an authorization was refused: $(compose logs --no-color 2>/dev/null | grep -iE 'authori[sz]ation failed|not authorized' | head -3)"
denied="$(timeout 120 bash "${DIR}/compose.sh" -p "${PROJECT}" -f "${DIR}/docker-compose.yml" -f "${DIR}/docker-compose.local.yml" --profile demo \
  run --rm --no-deps -T demo-rollout-0 robustrl tail --topic verdicts --from-beginning 2>&1 || true)"
grep -qiE 'authoriz|not be allowed' <<<"${denied}" && pass "the broker refuses an agent's login the verdicts topic" || fail "an agent's login tailing verdicts: $(tail -3 <<<"${denied}")"

# A machine added later (docs/operators/deploy.md): its login on the running broker, then its ACLs.
out="$(compose exec -T kafka sh /etc/robustrl/kafka-start.sh add-login agent-demo-rollout-1 2>&1)" &&
  out="$(compose run --rm --no-deps -T kafka-acls robustrl kafka grant agent-demo-rollout-1 --role agent --machine demo-rollout-1 2>&1)" &&
  pass "a login added on the running broker and granted its ACLs" || fail "add-login / grant: $(tail -3 <<<"${out}")"

compose down -v >/dev/null 2>&1 && pass "the stack is down" || fail "compose down"
trap - EXIT
