#!/usr/bin/env bash
# Checks the availability SLO of deploy/slo:
#   1. deploy/prometheus/rules/slo.yml is exactly what the pinned Sloth
#      (tools/sloth/go.mod) generates from deploy/slo/availability.yml
#      (deploy/slo/generate.sh --check); the Kubernetes and Helm copies of
#      the rule files are checked by kubernetes.sh and helm.sh, the rules'
#      behaviour by promtool.sh (deploy/prometheus/tests/slo_test.yml);
#   2. the generated rules keep what the tests, the dashboard and the
#      documentation assume: the objective 99.5%, the period 30 days, and
#      the alert DeploymentServiceErrorBudgetBurn as a page (critical) and a
#      ticket (warning).
#
# Sloth comes from $SLOTH_BIN, else $(go env GOPATH)/bin/sloth when that is
# the pinned version, else it is built there from tools/sloth (a few minutes
# the first time; CI starts that build early with `deploy/slo/generate.sh
# --sloth` in the background).
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"${repo}/deploy/slo/generate.sh" --check

rules="${repo}/deploy/prometheus/rules/slo.yml"
# want PATTERN WHAT: the generated rules hold a line matching PATTERN.
want() { grep -qE "$1" "${rules}" || die "deploy/prometheus/rules/slo.yml has no $2 (line matching $1); the tests and docs assume it"; }
want '^    expr: vector\(0\.995\)$' "objective of 99.5% (slo:objective:ratio)"
want '^    expr: vector\(30\)$' "period of 30 days (slo:time_period:days)"
[[ $(grep -cE '^  - alert: DeploymentServiceErrorBudgetBurn$' "${rules}") -eq 2 ]] ||
  die "deploy/prometheus/rules/slo.yml must have the alert DeploymentServiceErrorBudgetBurn twice (page and ticket)"
want '^      sloth_severity: page$' "page alert"
want '^      sloth_severity: ticket$' "ticket alert"
log "ok: the SLO rules are Sloth's, objective 99.5% over 30 days, with a page and a ticket"
