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
pass "kube-apiserver, controller-manager, scheduler and 5 kwok nodes up: $(k get nodes --no-headers | awk '{print $1"="$2}' | tr '\n' ' ')"

# The orchestrator's suite on the real API server (the integration tier's Kafka/PostgreSQL are not
# used by it: named, so jest's global setup starts none).
(cd "${ROOT}" && ROBUSTRL_K8S_KUBECONFIG="${KUBECONFIG}" KAFKA_BROKERS=unused:1 DATABASE_URL=postgres://unused NODE_OPTIONS=--experimental-vm-modules \
  npx jest --selectProjects integration --testPathPatterns kubernetes-orchestrator.apiserver 2>&1 | tail -15) >/tmp/robustrl-k8s-orchestrator.log
grep -Eq '^Tests: +[0-9]+ passed, [0-9]+ total' /tmp/robustrl-k8s-orchestrator.log &&
  pass "the Kubernetes orchestrator's suite on the real API server: $(grep 'Tests:' /tmp/robustrl-k8s-orchestrator.log)" || fail "orchestrator suite: $(cat /tmp/robustrl-k8s-orchestrator.log)"

# A drain, end to end: the eviction of a rollout pod (kubectl drain's cordon and eviction API) is read by
# the controller's orchestrator from the cluster and replaces the machine before the pod's grace ends
# (test/e2e/kwok-drain.int.spec.ts: the integration tier's own Kafka and PostgreSQL, agents as local processes).
(cd "${ROOT}" && ROBUSTRL_K8S_KUBECONFIG="${KUBECONFIG}" NODE_OPTIONS=--experimental-vm-modules \
  npx jest --selectProjects integration --testPathPatterns kwok-drain 2>&1 | tail -40) >/tmp/robustrl-k8s-drain.log
grep -Eq '^Tests: +1 passed, 1 total' /tmp/robustrl-k8s-drain.log &&
  pass "a drain's eviction is the notice, and the machine is replaced before its grace ends: $(grep -o 'kwok-drain: .*' /tmp/robustrl-k8s-drain.log | head -1)" ||
  fail "kwok drain: $(cat /tmp/robustrl-k8s-drain.log)"

[[ -x "${HELM}" ]] || bash "${ROOT}/deploy/helm/test.sh" >/dev/null # builds helm
"${HELM}" install rl "${ROOT}/deploy/helm/robustrl" --kubeconfig "${KUBECONFIG}" -n robustrl --create-namespace \
  -f "${ROOT}/deploy/helm/test/values-external.yaml" --wait --timeout 120s >/dev/null || fail "helm install: $(k -n robustrl get pods -o wide 2>&1)"
pass "helm install on the API server (every object accepted, every pod Running within --wait)"

pods="$(k -n robustrl get pods -o custom-columns=COMPONENT:.metadata.labels.app\\.kubernetes\\.io/component,NODE:.spec.nodeName --no-headers)"
control="$(grep -v '^agent ' <<<"${pods}")"
agents="$(grep '^agent ' <<<"${pods}")"
[[ "$(wc -l <<<"${control}")" -ge 5 ]] && ! grep -q ' gpu-' <<<"${control}" && pass "the control plane runs off GPU nodes: $(awk '{print $1"@"$2}' <<<"${control}" | tr '\n' ' ')" ||
  fail "control-plane placement: ${control}"
[[ "$(awk '{print $2}' <<<"${agents}" | sort | tr '\n' ' ')" == "gpu-0 gpu-1 gpu-2 " ]] && pass "one agent on each GPU node, none elsewhere: $(awk '{print $1"@"$2}' <<<"${agents}" | tr '\n' ' ')" ||
  fail "agent placement: ${agents}"

sa=system:serviceaccount:robustrl:rl-robustrl-controller
can() { k auth can-i "$@" --as "${sa}" 2>/dev/null || true; }
[[ "$(can patch pods -n robustrl)" == yes && "$(can patch deployments.apps -n robustrl)" == yes && "$(can patch nodes)" == yes ]] &&
  pass "the controller may patch pods, Deployments and nodes (its orchestrator's work)" || fail "controller RBAC too narrow"
[[ "$(can get secrets -n robustrl)" == no && "$(can create pods -n robustrl)" == no && "$(can delete nodes)" == no && "$(can patch pods -n default)" == no ]] &&
  pass "and nothing more: no secrets, no pod creation, no node deletion, no other namespace" || fail "controller RBAC too wide"

"${HELM}" uninstall rl --kubeconfig "${KUBECONFIG}" -n robustrl --wait >/dev/null && pass "helm uninstall" || fail "helm uninstall"

# A verl-shaped job (deploy/helm/examples/verl-values.yaml): a trainer pool (gpu-0) and a rollout pool
# (gpu-1, gpu-2). Three rollout machines asked for on two rollout nodes: the third waits, never doubling up.
# (Its workers ask for one GPU and little else here, so only the anti-affinity keeps two off one node.)
"${HELM}" install job "${ROOT}/deploy/helm/robustrl" --kubeconfig "${KUBECONFIG}" -n verl --create-namespace \
  -f "${ROOT}/deploy/helm/test/values-external.yaml" -f "${ROOT}/deploy/helm/examples/verl-values.yaml" --set agent.rolloutCommand= \
  --set job.workers.trainer.replicas=1 --set job.workers.rollout.replicas=3 --set job.workers.rollout.gpus=1 \
  --set job.workers.rollout.resources.requests.cpu=1 --set job.workers.rollout.resources.requests.memory=1Gi >/dev/null || fail "helm install (verl example): $(k -n verl get pods -o wide 2>&1)"
placed() { # COMPONENT: its pods' nodes, or Pending, sorted
  k -n verl get pods -l "app.kubernetes.io/component=$1" -o custom-columns=NODE:.spec.nodeName,PHASE:.status.phase --no-headers |
    awk '{print ($1 == "<none>" ? "Pending" : $1)}' | sort | tr '\n' ' '
}
for _ in $(seq 1 60); do
  [[ "$(placed worker-rollout)" == "Pending gpu-1 gpu-2 " && "$(placed worker-trainer)" == "gpu-0 " ]] && break
  sleep 1
done
agents="$(k -n verl get pods -l app.kubernetes.io/component=agent -o custom-columns=POOL:.metadata.labels.robustrl\\.io/agent-pool,NODE:.spec.nodeName --no-headers | sort | tr -s ' ' | tr '\n' ' ')"
[[ "${agents}" == "rollout gpu-1 rollout gpu-2 trainer gpu-0 " ]] && pass "verl example: an agent per node of each pool ($(tr -s ' ' <<<"${agents}"))" ||
  fail "verl example agents: ${agents}"
[[ "$(placed worker-trainer)" == "gpu-0 " && "$(placed worker-rollout)" == "Pending gpu-1 gpu-2 " ]] &&
  pass "verl example: workers on their pool's nodes, one machine to a node (trainer: $(placed worker-trainer); rollout: $(placed worker-rollout))" ||
  fail "verl example placement: trainer $(placed worker-trainer), rollout $(placed worker-rollout)"
why="$(k -n verl get events --field-selector reason=FailedScheduling -o custom-columns=MSG:.message --no-headers | tail -1)"
grep -q "anti-affinity" <<<"${why}" && pass "verl example: the third rollout machine waits for a rollout node (${why})" || fail "verl example: no anti-affinity refusal: ${why}"
[[ "$(placed ray-head)" =~ ^cpu- && "$(placed driver)" =~ ^cpu- && "$(placed rollout-manager)" =~ ^cpu- ]] &&
  pass "verl example: the Ray head, the driver and the router's rollout manager run off GPU nodes" || fail "verl example: head $(placed ray-head), driver $(placed driver)"
[[ "$(k -n verl get svc job-robustrl-router -o jsonpath='{.spec.type}:{.spec.ports[0].port}')" == "LoadBalancer:8000" ]] &&
  pass "verl example: the router exposed (LoadBalancer :8000)" || fail "verl example: router service $(k -n verl get svc 2>&1)"
"${HELM}" uninstall job --kubeconfig "${KUBECONFIG}" -n verl >/dev/null && pass "helm uninstall (verl example)" || fail "helm uninstall (verl example)"
