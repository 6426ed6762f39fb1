#!/usr/bin/env bash
# Checks the Kubernetes manifests without a cluster:
#   1. deploy/kubernetes/prometheusrule.yaml is up to date with
#      deploy/prometheus/rules (tools/cmd/promrulegen -check);
#   2. `kubectl kustomize deploy/kubernetes` renders;
#   3. every rendered object decodes strictly into its Kubernetes or
#      Prometheus Operator API type, and the objects pass tools/cmd/k8scheck:
#      restricted security context, resources, probes, the API key read from
#      a Secret file through --api.key-file, connected selectors and ports, and
#      container arguments that the exporter binary (its --help) accepts.
#
# Environment: EXPORTER_BIN=path skips the build and uses that binary.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_apt kubectl kubectl

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

(cd "${repo}/tools" && go run ./cmd/promrulegen -check \
  -out ../deploy/kubernetes/prometheusrule.yaml ../deploy/prometheus/rules/*.yml)

kubectl kustomize "${repo}/deploy/kubernetes" >"${work}/rendered.yaml"
log "ok: kubectl kustomize deploy/kubernetes rendered $(grep -c '^kind:' "${work}/rendered.yaml") objects"

exporter=$(exporter_binary "${work}")
"${exporter}" --help >"${work}/help.txt" 2>&1 || die "${exporter} --help failed: $(cat "${work}/help.txt")"

k8scheck=$(tools_binary k8scheck "${work}")
"${k8scheck}" -help "${work}/help.txt" "${work}/rendered.yaml"
