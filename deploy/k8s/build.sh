#!/usr/bin/env bash
# The Kubernetes control plane's binaries for deploy/k8s/cluster.sh, built once per machine from the
# Kubernetes Go modules (../shared/reference/deploy-testing.md): `go install k8s.io/kubernetes/cmd/…`
# refuses the module's replace directives, so a wrapper module requires k8s.io/kubernetes and replaces
# its 30 staging modules with their published versions. kube-apiserver, kube-controller-manager and
# kube-scheduler (minutes on 2 cores), kwok (the nodes' fake kubelets), etcd from Debian.
set -euo pipefail
K8S_VERSION=1.31.0
KWOK_VERSION=v0.6.1
GO_DIR="${ROBUSTRL_GO_DIR:-/var/tmp/robustrl-go}"
BUILD="${ROBUSTRL_K8S_BUILD_DIR:-/var/tmp/robustrl-k8sbuild}"
export GOPATH="${GO_DIR}" GOFLAGS=-mod=mod

command -v etcd >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server >&2
mkdir -p "${BUILD}/bin"
if [[ ! -f "${BUILD}/go.mod" ]]; then
  {
    printf 'module robustrl.local/k8sbuild\n\ngo 1.22.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "${K8S_VERSION}"
    for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider cluster-bootstrap \
      code-generator component-base component-helpers controller-manager cri-api cri-client csi-translation-lib \
      dynamic-resource-allocation endpointslice kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler \
      kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller; do
      printf '\tk8s.io/%s => k8s.io/%s v0.%s\n' "${m}" "${m}" "${K8S_VERSION#1.}"
    done
    printf ')\n'
  } >"${BUILD}/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n)\n' >"${BUILD}/tools.go"
  (cd "${BUILD}" && go mod tidy >&2)
fi
# The version the binaries report (/version: what helm checks a chart's kubeVersion against); without
# it a module build says v0.0.0-master.
V=k8s.io/component-base/version
LDFLAGS="-X ${V}.gitVersion=v${K8S_VERSION} -X ${V}.gitMajor=${K8S_VERSION%%.*} -X ${V}.gitMinor=$(cut -d. -f2 <<<"${K8S_VERSION}") -X ${V}.gitTreeState=clean"
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  [[ -x "${BUILD}/bin/${c}" && -f "${BUILD}/bin/.${c}.v${K8S_VERSION}" ]] && continue
  echo "[k8s] building ${c} ${K8S_VERSION} (minutes, once per machine)" >&2
  (cd "${BUILD}" && go build -ldflags "${LDFLAGS}" -o "bin/${c}" "k8s.io/kubernetes/cmd/${c}" >&2)
  touch "${BUILD}/bin/.${c}.v${K8S_VERSION}"
done
if [[ ! -x "${BUILD}/bin/kwok" ]]; then
  echo "[k8s] building kwok ${KWOK_VERSION}" >&2
  go install "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" >&2
  cp "${GO_DIR}/bin/kwok" "${BUILD}/bin/kwok"
fi
# kwok needs stages (what a fake kubelet does to nodes and pods): they come with its module. A deleted
# pod goes at once, as kwok's fast stage has it, unless it carries robustrl.io/kwok-honour-grace: then it
# stays until its grace period ends (its deletionTimestamp), as a pod whose process takes its whole
# grace would — what a drain test needs to act before the pod goes.
STAGES="${BUILD}/kwok-stages.v2.yaml"
if [[ ! -f "${STAGES}" ]]; then
  mod="$(go env GOMODCACHE)/sigs.k8s.io/kwok@${KWOK_VERSION}/kustomize/stage"
  for s in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml; do
    cat "${mod}/${s}"
    echo '---'
  done >"${STAGES}.tmp"
  cat >>"${STAGES}.tmp" <<'STAGE'
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: { apiGroup: v1, kind: Pod }
  selector:
    matchExpressions:
      - { key: '.metadata.deletionTimestamp', operator: 'Exists' }
      - { key: '.metadata.annotations["robustrl.io/kwok-honour-grace"]', operator: 'DoesNotExist' }
  next: { finalizers: { empty: true }, delete: true }
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete-after-grace
spec:
  resourceRef: { apiGroup: v1, kind: Pod }
  selector:
    matchExpressions:
      - { key: '.metadata.deletionTimestamp', operator: 'Exists' }
      - { key: '.metadata.annotations["robustrl.io/kwok-honour-grace"]', operator: 'Exists' }
  delay: { durationMilliseconds: 0, durationFrom: { expressionFrom: '.metadata.deletionTimestamp' } }
  next: { finalizers: { empty: true }, delete: true }
STAGE
  mv "${STAGES}.tmp" "${STAGES}"
fi
echo "[k8s] binaries in ${BUILD}/bin" >&2
