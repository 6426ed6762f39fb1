#!/usr/bin/env bash
# Runs every check of deploy/ and grafana/, building the exporter once.
#   deploy/test/all.sh
# Environment: EXPORTER_BIN=path uses that binary instead of building one.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
EXPORTER_BIN=$(exporter_binary "${work}")
export EXPORTER_BIN

here="${repo}/deploy/test"
(cd "${repo}/tools" && go vet ./... && go test ./...)
(cd "${repo}/tools" && go run ./cmd/dashcheck "${repo}/grafana/dashboards")
"${here}/check_dockerfile.sh"
"${here}/slo.sh"
"${here}/promtool.sh"
"${here}/kubernetes.sh"
"${here}/helm.sh"
"${here}/kubescore.sh"
"${here}/configcheck.sh"
"${here}/compose.sh"
"${here}/e2e_prometheus.sh"
"${here}/e2e_alerts.sh"
"${here}/e2e_victoriametrics.sh"
"${here}/e2e_scaling.sh"
