#!/usr/bin/env bash
# The chart tier of the deploy tests (npm run test:deploy): helm lint, helm template for a production
# and a trial configuration, every rendered manifest validated by kubeconform (strict, Kubernetes 1.31,
# schemas offline from the kubernetes-validate package), the affinity/probe/RBAC rules checked
# (test/check-rendered.js), and bad configurations refused with their message. Tools are built or
# installed once per machine (helm and kubeconform from their Go modules, the schemas from PyPI).
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${DIR}/../.." && pwd)"
CHART="${DIR}/robustrl"
K8S_VERSION=1.31.0
GO_DIR="${ROBUSTRL_GO_DIR:-/var/tmp/robustrl-go}"
VENV="${ROBUSTRL_VENV:-/var/tmp/robustrl-venv}"
SCHEMAS="${ROBUSTRL_K8S_SCHEMAS:-/var/tmp/robustrl-k8s-schemas}"
HELM="${GO_DIR}/bin/helm-v3.16.2"
KUBECONFORM="${GO_DIR}/bin/kubeconform-v0.6.7"

go_tool() { # BINARY MODULE@VERSION NAME
  [[ -x "$1" ]] && return 0
  echo "[chart] building $3 from its Go module (once per machine)" >&2
  GOPATH="${GO_DIR}" GOFLAGS=-mod=mod go install "$2" >&2
  mv "${GO_DIR}/bin/$3" "$1"
}
go_tool "${HELM}" helm.sh/helm/v3/cmd/helm@v3.16.2 helm
go_tool "${KUBECONFORM}" github.com/yannh/kubeconform/cmd/kubeconform@v0.6.7 kubeconform
if [[ ! -d "${SCHEMAS}/v${K8S_VERSION}-local-strict" ]]; then
  echo "[chart] Kubernetes schemas from PyPI kubernetes-validate (once per machine)" >&2
  [[ -x "${VENV}/bin/python" ]] || python3 -m venv "${VENV}"
  "${VENV}/bin/pip" install -q 'kubernetes-validate==1.31.0' >&2
  src="$("${VENV}/bin/python" -c 'import kubernetes_validate, os; print(os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema"))')"
  rm -rf "${SCHEMAS}.tmp" && mkdir -p "${SCHEMAS}.tmp"
  for v in "v${K8S_VERSION}-local-strict" "v${K8S_VERSION}-local"; do
    mkdir -p "${SCHEMAS}.tmp/${v}"
    # Their $refs point at /api/_definitions.json: made into file references kubeconform can follow.
    for f in "${src}/${v}"/*.json; do
      sed "s#\"/api/_definitions.json#\"file://${SCHEMAS}/${v}/_definitions.json#g" "${f}" >"${SCHEMAS}.tmp/${v}/$(basename "${f}")"
    done
  done
  rm -rf "${SCHEMAS}" && mv "${SCHEMAS}.tmp" "${SCHEMAS}"
fi

pass() { echo "PASS chart: $*"; }
fail() { echo "FAIL chart: $*"; exit 1; }
validate() { # kubeconform, strict, offline; the ServiceMonitor CRD has no schema there
  "${KUBECONFORM}" -strict -summary -kubernetes-version "${K8S_VERSION}" -skip ServiceMonitor \
    -schema-location "${SCHEMAS}/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"
}

# The verl example is rendered over the production settings, as a user installs it (less their role
# command: its framework starts its own processes).
verl=(-f "${DIR}/test/values-external.yaml" -f "${DIR}/examples/verl-values.yaml" --set agent.rolloutCommand=)
for values in external bundled secured verl; do
  f=(-f "${DIR}/test/values-${values}.yaml")
  [[ "${values}" == verl ]] && f=("${verl[@]}")
  "${HELM}" lint --strict "${CHART}" "${f[@]}" >/dev/null || fail "helm lint (${values}): $("${HELM}" lint --strict "${CHART}" "${f[@]}" 2>&1 | tail -5)"
  pass "helm lint --strict (${values})"
  rendered="$("${HELM}" template rl "${CHART}" -n robustrl --kube-version "${K8S_VERSION}" "${f[@]}")" || fail "helm template (${values})"
  summary="$(validate <<<"${rendered}")" || fail "kubeconform (${values}): ${summary}"
  pass "kubeconform -strict, Kubernetes ${K8S_VERSION} (${values}): $(tail -1 <<<"${summary}")"
  (cd "${ROOT}" && node "${DIR}/test/check-rendered.js" <<<"${rendered}") || fail "rendered rules (${values})"
done

refused() { # WHAT EXPECTED-MESSAGE helm-template-args…
  local what="$1" expected="$2" out
  shift 2
  if out="$("${HELM}" template rl "${CHART}" --kube-version "${K8S_VERSION}" "$@" 2>&1)"; then fail "${what}: rendered"; fi
  grep -q -- "${expected}" <<<"${out}" && pass "refused: ${what}" || fail "${what}: unexpected message: ${out}"
}
base=(-f "${DIR}/test/values-external.yaml")
refused "no Kafka" "kafka.brokers is required" "${base[@]}" --set kafka.brokers=
refused "a short identity secret" "identitySecret must have at least 32" "${base[@]}" --set secrets.identitySecret=short
refused "a short command secret" "controllerCommandSecret must have at least 32" "${base[@]}" --set secrets.controllerCommandSecret=short
refused "no token" "httpTokens must list at least one" "${base[@]}" --set 'secrets.httpTokens=null'
refused "agents without a job" "agent.jobId is required" "${base[@]}" --set agent.jobId=
refused "a machine key without the controller's public key" "go together" "${base[@]}" --set agent.controllerPublicKey=
refused "agents without their keys (every record would be dead-lettered)" "are required with agent.enabled" "${base[@]}" --set agent.machineKeyHostPath= --set agent.controllerPublicKey=
refused "agents without the control plane's public key (a forged retirement would be acted on)" "agent.controlPlanePublicKey is required" "${base[@]}" --set agent.controlPlanePublicKey=
refused "the chart's defaults with a job named (agents without keys)" "are required with agent.enabled" --set agent.jobId=job-1 --set kafka.bundled=true --set postgresql.bundled=true --set secrets.identitySecret=chart-test-identity-secret-0123456789abcdef --set 'secrets.httpTokens={chart-test-operator-token-0123}' --set secrets.postgresPassword=chart-test-postgres-pw
refused "trainer agents without their role certificate (their registration would be refused)" "agent.roleCertificateHostPath is required for agent.role=trainer" "${base[@]}" --set agent.role=trainer
refused "an unknown role (values.schema.json)" "agent.role" "${base[@]}" --set agent.role=bogus
refused "a role command with cooperate mode" "no trainerCommand or rolloutCommand with agent.integration=cooperate" "${verl[@]}" --set agent.pools.rollout.rolloutCommand=x
refused "a trainer pool without its role certificate" "agent.roleCertificateHostPath is required for agent.role=trainer (agent.pools.trainer)" "${verl[@]}" --set agent.pools.trainer.roleCertificateHostPath=
refused "workers of a pool with no agent" "job.workers.rollout.pool: \"gpu\" is not one of agent.pools (rollout, trainer)" "${verl[@]}" --set job.workers.rollout.pool=gpu
refused "a job without its image" "job.image.repository is required" "${verl[@]}" --set job.image.repository=
refused "a pool without its nodes' labels (values.schema.json)" "nodeSelector" "${verl[@]}" --set agent.pools.extra.role=rollout
refused "a malformed engine list (values.schema.json)" "agent.pools.rollout.engines" "${verl[@]}" --set agent.pools.rollout.engines=a:8000
secured=(-f "${DIR}/test/values-secured.yaml")
refused "a Kafka login without TLS" "a login is never sent in the clear" "${secured[@]}" --set kafka.tls.enabled=false
refused "a Kafka login without the services' passwords" "kafka.sasl.loginsSecret is required" "${secured[@]}" --set kafka.sasl.loginsSecret=
refused "agents without their Kafka passwords" "agentPasswordHostPath is required" "${secured[@]}" --set kafka.sasl.agentPasswordHostPath=
refused "granting ACLs without an admin login" "kafka.acls.grant needs" "${secured[@]}" --set kafka.acls.adminSecret=
refused "TLS to the bundled broker" "the bundled broker is plaintext" -f "${DIR}/test/values-bundled.yaml" --set kafka.tls.enabled=true
refused "an unknown SASL mechanism (values.schema.json)" "kafka.sasl.mechanism" "${secured[@]}" --set kafka.sasl.mechanism=gssapi
refused "an unknown value (values.schema.json)" "Additional property" "${base[@]}" --set services.detector.replica=2
