#!/usr/bin/env bash
# A real Kubernetes control plane on this machine, for the deploy tests: etcd, kube-apiserver (token
# auth, RBAC), kube-controller-manager and kube-scheduler, and kwok playing the kubelets of five nodes —
# gpu-0, gpu-1 and gpu-2 (labelled nvidia.com/gpu.present=true, 8 GPUs each, pools trainer, rollout, rollout) and cpu-0 and cpu-1. Pods are scheduled by
# the real scheduler and marked Running by kwok; no container runs.
#
# Usage: deploy/k8s/cluster.sh up | down | kubeconfig      (state in ${ROBUSTRL_K8S_DIR:-/var/tmp/robustrl-k8s})
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE="${ROBUSTRL_K8S_DIR:-/var/tmp/robustrl-k8s}"
BUILD="${ROBUSTRL_K8S_BUILD_DIR:-/var/tmp/robustrl-k8sbuild}"
BIN="${BUILD}/bin"
ETCD_PORT="${ROBUSTRL_K8S_ETCD_PORT:-23790}"
API_PORT="${ROBUSTRL_K8S_API_PORT:-26443}"
KUBECONFIG_FILE="${STATE}/kubeconfig"
log() { echo "[k8s] $*" >&2; }
die() { echo "[k8s] $*" >&2; exit 1; }

start() { # NAME command…
  local name="$1"
  shift
  setsid "$@" >"${STATE}/${name}.log" 2>&1 </dev/null &
  echo $! >"${STATE}/${name}.pid"
}
wait_for() { # WHAT SECONDS command…
  local what="$1" deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "${what} not ready after $((deadline - SECONDS + $2)) s (logs in ${STATE})"
    sleep 0.5
  done
}

up() {
  bash "${DIR}/build.sh"
  down quiet
  mkdir -p "${STATE}/certs" "${STATE}/etcd"
  local token
  token="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
  printf '%s,admin,admin,system:masters\n' "${token}" >"${STATE}/tokens.csv"
  openssl genrsa -out "${STATE}/sa.key" 2048 2>/dev/null
  openssl rsa -in "${STATE}/sa.key" -pubout -out "${STATE}/sa.pub" 2>/dev/null
  cat >"${KUBECONFIG_FILE}" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: robustrl-test
    cluster: { server: https://127.0.0.1:${API_PORT}, insecure-skip-tls-verify: true }
users:
  - name: admin
    user: { token: ${token} }
contexts:
  - name: robustrl-test
    context: { cluster: robustrl-test, user: admin, namespace: default }
current-context: robustrl-test
KUBECONFIG

  start etcd etcd --data-dir "${STATE}/etcd" --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))"
  wait_for etcd 30 curl -sf "http://127.0.0.1:${ETCD_PORT}/health"
  start kube-apiserver "${BIN}/kube-apiserver" --etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "${API_PORT}" --cert-dir "${STATE}/certs" \
    --token-auth-file "${STATE}/tokens.csv" --authorization-mode RBAC \
    --service-account-key-file "${STATE}/sa.pub" --service-account-signing-key-file "${STATE}/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.96.0.0/24 --allow-privileged=true
  wait_for kube-apiserver 90 curl -skf -H "Authorization: Bearer ${token}" "https://127.0.0.1:${API_PORT}/readyz"
  start kube-controller-manager "${BIN}/kube-controller-manager" --kubeconfig "${KUBECONFIG_FILE}" \
    --service-account-private-key-file "${STATE}/sa.key" --root-ca-file "${STATE}/certs/apiserver.crt" \
    --leader-elect=false --secure-port 0 --use-service-account-credentials=false
  start kube-scheduler "${BIN}/kube-scheduler" --kubeconfig "${KUBECONFIG_FILE}" --leader-elect=false --secure-port 0
  start kwok "${BIN}/kwok" --kubeconfig "${KUBECONFIG_FILE}" --config "${BUILD}/kwok-stages.v2.yaml" \
    --manage-all-nodes=true --cidr 10.0.0.1/24 --node-ip 10.0.0.1
  # gpu-0 is the trainer pool's, gpu-1 and gpu-2 the rollout pool's (robustrl.io/pool), 8 GPUs each.
  for node in gpu-0 gpu-1 gpu-2 cpu-0 cpu-1; do
    local gpu=false pool=none gpus=0
    [[ "${node}" == gpu-* ]] && gpu=true gpus=8
    [[ "${node}" == gpu-0 ]] && pool=trainer
    [[ "${node}" == gpu-[12] ]] && pool=rollout
    kubectl --kubeconfig "${KUBECONFIG_FILE}" apply -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: ${node}
  annotations: { node.alpha.kubernetes.io/ttl: '0', kwok.x-k8s.io/node: fake }
  labels: { kubernetes.io/hostname: ${node}, kubernetes.io/os: linux, type: kwok, nvidia.com/gpu.present: '${gpu}', robustrl.io/pool: ${pool} }
status:
  allocatable: { cpu: '64', memory: 1Ti, pods: '110', nvidia.com/gpu: '${gpus}' }
  capacity: { cpu: '64', memory: 1Ti, pods: '110', nvidia.com/gpu: '${gpus}' }
NODE
  done
  wait_for "5 Ready nodes" 60 bash -c "[[ \$(kubectl --kubeconfig '${KUBECONFIG_FILE}' get nodes --no-headers 2>/dev/null | grep -c ' Ready ') == 5 ]]"
  log "up: kube-apiserver https://127.0.0.1:${API_PORT}, nodes gpu-0 gpu-1 gpu-2 cpu-0 cpu-1 (KUBECONFIG=${KUBECONFIG_FILE})"
}

down() {
  local name pid
  for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    [[ -f "${STATE}/${name}.pid" ]] || continue
    pid="$(cat "${STATE}/${name}.pid")"
    kill "${pid}" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.2; done
    kill -9 "${pid}" 2>/dev/null || true
    rm -f "${STATE}/${name}.pid"
  done
  rm -rf "${STATE}/etcd"
  [[ "${1:-}" == quiet ]] || log "down"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  kubeconfig) echo "${KUBECONFIG_FILE}" ;;
  *) die "usage: $0 up|down|kubeconfig" ;;
esac
