#!/usr/bin/env bash
# Scores the rendered Kubernetes objects with kube-score (a tool nobody here
# wrote): the kustomize base (with a dummy key) and the Helm chart with each
# values file of its ci/. A critical finding fails the check; warnings are
# printed. Two tests are ignored, for the reasons the chart's README gives
# ("kube-score"):
#   container-image-pull-policy  the image is pinned to a release tag (or a
#                                digest) that is never re-pushed, so
#                                IfNotPresent is the right policy;
#   pod-networkpolicy            the chart's NetworkPolicy is opt-in
#                                (networkPolicy.enabled: only the operator
#                                knows where Prometheus runs) and the base
#                                has none; ci/full-values.yaml enables it
#                                and is scored with this test on.
#
# kube-score comes from PATH or $(go env GOPATH)/bin, else go install builds
# it (a minute or two); helm and kustomize likewise.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=deploy/test/lib_k8s.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib_k8s.sh"

readonly kube_version=1.33.0 # as deploy/test/helm.sh renders
chart="${repo}/deploy/helm/deployment-service-exporter"

kube_score=$(ensure_go_tool kube-score github.com/zegl/kube-score/cmd/kube-score@v1.20.0)
helm=$(ensure_go_tool helm helm.sh/helm/v3/cmd/helm@v3.22.0)
kustomize=$(ensure_go_tool kustomize sigs.k8s.io/kustomize/kustomize/v5@v5.5.0)

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

# score NAME FILE [KUBE-SCORE-ARGS...]: no critical finding in FILE.
score() {
  local name=$1 file=$2
  shift 2
  local rc=0
  "${kube_score}" score --output-format ci --ignore-test container-image-pull-policy "$@" "${file}" >"${work}/score.txt" || rc=$?
  grep -E '^\[(WARNING|CRITICAL)\]' "${work}/score.txt" | sed "s/^/${name}: /" >&2 || true
  if [[ "${rc}" -ne 0 ]] || grep -q '^\[CRITICAL\]' "${work}/score.txt"; then
    die "kube-score: critical findings in ${name} (rendered: ${file})"
  fi
  grep -q 'apps/v1/Deployment' "${work}/score.txt" || die "kube-score scored no Deployment in ${name}"
  log "ok: ${name}: no critical kube-score finding"
}

# The kustomize base, with a dummy key (it does not render without one).
mkdir -p "${work}/kustomize"
cp -R "${repo}/deploy/kubernetes" "${work}/kustomize/base"
printf 'dummy' >"${work}/kustomize/base/api-key"
"${kustomize}" build "${work}/kustomize/base" >"${work}/kustomize.yaml"
score kustomize "${work}/kustomize.yaml" --ignore-test pod-networkpolicy

for values in "${chart}"/ci/*-values.yaml; do
  name=$(basename "${values}" .yaml)
  "${helm}" template dse "${chart}" --kube-version "${kube_version}" --namespace observability \
    -f "${values}" >"${work}/${name}.yaml" 2>"${work}/err.txt" ||
    die "helm template -f ${values}: $(cat "${work}/err.txt")"
  if grep -qx 'kind: NetworkPolicy' "${work}/${name}.yaml"; then
    score "helm ${name}" "${work}/${name}.yaml"
  else
    score "helm ${name}" "${work}/${name}.yaml" --ignore-test pod-networkpolicy
  fi
done
grep -qx 'kind: NetworkPolicy' "${work}/full-values.yaml" ||
  die "ci/full-values.yaml renders no NetworkPolicy: pod-networkpolicy is scored on no case"
