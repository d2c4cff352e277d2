#!/usr/bin/env bash
# The Kubernetes tier of the deploy tests (npm run test:deploy): a real API server with kwok nodes
# (cluster.sh), the Kubernetes orchestrator's suite run against it, and the Helm chart installed on it —
# its pods scheduled by the real scheduler where the affinity rules say, its RBAC as the controller's
# service account sees it. One line per check; non-zero exit on the first failure.
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${DIR}/../.." && pwd)"
HELM="${ROBUSTRL_GO_DIR:-/var/tmp/robustrl-go}/bin/helm-v3.16.2"
pass() { echo "PASS k8s: $*"; }
fail() { echo "FAIL k8s: $*"; exit 1; }

bash "${DIR}/cluster.sh" up
trap 'bash "${DIR}/cluster.sh" down' EXIT
export KUBECONFIG="$(bash "${DIR}/cluster.sh" kubeconfig)"
k() { kubectl --kubeconfig "${KUBECONFIG}" "$@"; }
pass "kube-apiserver, controller-manager, scheduler and 4 kwok nodes up: $(k get nodes --no-headers | awk '{print $1"="$2}' | tr '\n' ' ')"

# The orchestrator's suite on the real API server (the integration tier's Kafka/PostgreSQL are not
# used by it: named, so jest's global setup starts none).
(cd "${ROOT}" && ROBUSTRL_K8S_KUBECONFIG="${KUBECONFIG}" KAFKA_BROKERS=unused:1 DATABASE_URL=postgres://unused NODE_OPTIONS=--experimental-vm-modules \
  npx jest --selectProjects integration --testPathPatterns kubernetes-orchestrator.apiserver 2>&1 | tail -15) >/tmp/robustrl-k8s-orchestrator.log
grep -Eq '^Tests: +[0-9]+ passed, [0-9]+ total' /tmp/robustrl-k8s-orchestrator.log &&
  pass "the Kubernetes orchestrator's suite on the real API server: $(grep 'Tests:' /tmp/robustrl-k8s-orchestrator.log)" || fail "orchestrator suite: $(cat /tmp/robustrl-k8s-orchestrator.log)"

[[ -x "${HELM}" ]] || bash "${ROOT}/deploy/helm/test.sh" >/dev/null # builds helm
"${HELM}" install rl "${ROOT}/deploy/helm/robustrl" --kubeconfig "${KUBECONFIG}" -n robustrl --create-namespace \
  -f "${ROOT}/deploy/helm/test/values-external.yaml" --wait --timeout 120s >/dev/null || fail "helm install: $(k -n robustrl get pods -o wide 2>&1)"
pass "helm install on the API server (every object accepted, every pod Running within --wait)"

pods="$(k -n robustrl get pods -o custom-columns=COMPONENT:.metadata.labels.app\\.kubernetes\\.io/component,NODE:.spec.nodeName --no-headers)"
control="$(grep -v '^agent ' <<<"${pods}")"
agents="$(grep '^agent ' <<<"${pods}")"
[[ "$(wc -l <<<"${control}")" -ge 5 ]] && ! grep -q ' gpu-' <<<"${control}" && pass "the control plane runs off GPU nodes: $(awk '{print $1"@"$2}' <<<"${control}" | tr '\n' ' ')" ||
  fail "control-plane placement: ${control}"
[[ "$(awk '{print $2}' <<<"${agents}" | sort | tr '\n' ' ')" == "gpu-0 gpu-1 " ]] && pass "one agent on each GPU node, none elsewhere: $(awk '{print $1"@"$2}' <<<"${agents}" | tr '\n' ' ')" ||
  fail "agent placement: ${agents}"

sa=system:serviceaccount:robustrl:rl-robustrl-controller
can() { k auth can-i "$@" --as "${sa}" 2>/dev/null || true; }
[[ "$(can patch pods -n robustrl)" == yes && "$(can patch deployments.apps -n robustrl)" == yes && "$(can patch nodes)" == yes ]] &&
  pass "the controller may patch pods, Deployments and nodes (its orchestrator's work)" || fail "controller RBAC too narrow"
[[ "$(can get secrets -n robustrl)" == no && "$(can create pods -n robustrl)" == no && "$(can delete nodes)" == no && "$(can patch pods -n default)" == no ]] &&
  pass "and nothing more: no secrets, no pod creation, no node deletion, no other namespace" || fail "controller RBAC too wide"

"${HELM}" uninstall rl --kubeconfig "${KUBECONFIG}" -n robustrl --wait >/dev/null && pass "helm uninstall" || fail "helm uninstall"
