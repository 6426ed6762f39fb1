#!/usr/bin/env bash
# Static checks of the Prometheus and Alertmanager files:
#   promtool check config  on every Prometheus configuration (which also checks the rule files they load),
#   promtool check rules   on every rule file,
#   promtool test rules    on the rule unit tests (each alert firing and staying quiet),
#   amtool check-config    on the Alertmanager configuration of the compose stack,
#   every alert's runbook_url pointing at a section of deploy/RUNBOOK.md,
#   and a real Alertmanager with that configuration inhibiting what it should.
# Debian's prometheus, prometheus-alertmanager, curl and jq packages are
# installed when missing.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_apt promtool prometheus
ensure_apt amtool prometheus-alertmanager
ensure_apt prometheus-alertmanager prometheus-alertmanager
ensure_apt curl curl
ensure_apt jq jq

cd "${repo}"
configs=(deploy/prometheus/prometheus.yml deploy/prometheus/prometheus-probe.yml deploy/prometheus/prometheus-sd.yml
  deploy/compose/prometheus.yml)
rules=(deploy/prometheus/rules/*.yml)
tests=(deploy/prometheus/tests/*.yml)

for c in "${configs[@]}"; do
  # Each configuration is checked from its own directory, where its
  # relative rule_files paths resolve as they do in production.
  (cd "$(dirname "${c}")" && promtool check config "$(basename "${c}")")
done
promtool check rules "${rules[@]}"
promtool test rules "${tests[@]}"
amtool check-config deploy/compose/alertmanager.yml

# Every rule file must be loaded by every configuration: promtool check
# config above lists the files it found; make sure none is left out.
for c in "${configs[@]}"; do
  found=$(cd "$(dirname "${c}")" && { promtool check config "$(basename "${c}")" 2>&1 | grep -c '^Checking .*rules/' || true; })
  [[ "${found}" -eq "${#rules[@]}" ]] || die "${c} loads ${found} rule files, deploy/prometheus/rules has ${#rules[@]}"
done
# Every alert needs a unit test: at least one case where it fires and one
# where it stays quiet (promtool checks what each case expects).
alerts=$(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "${rules[@]}")
[[ -n "${alerts}" ]] || die "no alerts found in ${rules[*]}"
for a in ${alerts}; do
  cases=$(grep -hcE "^ *alertname: *${a} *$" "${tests[@]}" | awk '{s += $1} END {print s + 0}')
  quiet=$(grep -hA1 -E "^ *alertname: *${a} *$" "${tests[@]}" | grep -cE '^ *exp_alerts: *\[\] *$' || true)
  [[ "${cases}" -gt "${quiet}" && "${quiet}" -ge 1 ]] ||
    die "alert ${a} needs rule tests where it fires and where it stays quiet (has ${cases} cases, ${quiet} quiet)"
done
log "ok: every alert has a firing and a quiet test case"

# Every alert links its own section of the runbook: runbook_url is the
# runbook's URL with the alert name in lower case as anchor (GitHub's anchor
# for a "## AlertName" heading), and the runbook has that heading. The
# runbook has no section for an alert that does not exist.
runbook=deploy/RUNBOOK.md
runbook_base=https://github.com/deployment-service/deployment_service_exporter/blob/main/${runbook}
for a in ${alerts}; do
  want="${runbook_base}#${a,,}"
  got=$(awk -v a="${a}" '
    $0 ~ "^ *- alert: *" a " *$" { in_alert = 1; next }
    in_alert && /^ *- (alert|record):/ { exit }
    in_alert && /^ *runbook_url:/ { sub(/^ *runbook_url: */, ""); print; exit }
  ' "${rules[@]}")
  [[ "${got}" == "${want}" ]] || die "alert ${a}: runbook_url is '${got}', want '${want}'"
  grep -qxF "## ${a}" "${runbook}" || die "${runbook} has no section '## ${a}' for alert ${a}"
done
while read -r h; do
  grep -qxF "${h}" <<<"${alerts}" || die "${runbook} has a section for ${h}, which is no alert"
done < <(sed -n 's/^## \(DeploymentService[A-Za-z0-9]*\)$/\1/p' "${runbook}")
log "ok: every alert's runbook_url points at its section of ${runbook}"

# The Alertmanager configuration does what its comments say: a real
# Alertmanager gets a set of alerts and must suppress exactly the expected ones.
am_work=$(mktemp -d)
am_pid=
trap '[[ -n "${am_pid}" ]] && kill "${am_pid}" 2>/dev/null; rm -rf "${am_work}"' EXIT
am_url="http://127.0.0.1:$(free_port)"
prometheus-alertmanager --config.file=deploy/compose/alertmanager.yml \
  --storage.path="${am_work}" --web.listen-address="${am_url#http://}" \
  --cluster.listen-address= >"${am_work}/alertmanager.log" 2>&1 &
am_pid=$!
wait_http "${am_url}/-/ready" 30 || die "Alertmanager did not become ready: $(tail -n 5 "${am_work}/alertmanager.log")"
# alertname severity job instance module(- for none) state-expected
expected='DeploymentServiceAPIKeyRefused critical deployment_service a:10044 - active
DeploymentServiceErrorBudgetBurn critical deployment_service a:10044 - suppressed
DeploymentServiceErrorBudgetBurn warning deployment_service a:10044 - suppressed
DeploymentServiceLocationDetailFailing warning deployment_service a:10044 - suppressed
DeploymentServiceLocationCheckStale warning deployment_service a:10044 - suppressed
DeploymentServiceLocationCheckStale warning deployment_service c:10044 - active
DeploymentServiceExporterConfigReloadFailed warning deployment_service a:10044 - active
DeploymentServiceErrorBudgetBurn critical deployment_service b:10044 - active
DeploymentServiceErrorBudgetBurn warning deployment_service b:10044 - suppressed
DeploymentServiceErrorBudgetBurn warning deployment_service d:10044 - active
DeploymentServiceAPIKeyRefused critical deployment_service_probe https://deploy.example.com staging active
DeploymentServiceErrorBudgetBurn critical deployment_service_probe https://deploy.example.com staging suppressed
DeploymentServiceErrorBudgetBurn critical deployment_service_probe https://deploy.example.com default active
DeploymentServiceThrottled warning deployment_service_probe https://deploy.example.com default active
DeploymentServiceErrorBudgetBurn warning deployment_service_probe https://deploy.example.com default suppressed
DeploymentServiceErrorBudgetBurn warning deployment_service_probe https://deploy-eu.example.com default active
DeploymentServiceLocationDetailFailing warning deployment_service_probe https://deploy-eu.example.com default active'
alerts_json=$(jq -Rn '[inputs | split(" ") | {labels: ({alertname: .[0], severity: .[1], job: .[2], instance: .[3]}
  + (if .[4] == "-" then {} else {module: .[4]} end)
  + (if .[0] == "DeploymentServiceErrorBudgetBurn" then {sloth_severity: (if .[1] == "critical" then "page" else "ticket" end)} else {} end))}]' <<<"${expected}")
curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' --data "${alerts_json}" "${am_url}/api/v2/alerts" ||
  die "Alertmanager refused the test alerts"
got=$(curl -fsS "${am_url}/api/v2/alerts" |
  jq -r '.[] | "\(.labels.alertname) \(.labels.severity) \(.labels.job) \(.labels.instance) \(.labels.module // "-") \(.status.state)"' | sort)
[[ "${got}" == "$(sort <<<"${expected}")" ]] ||
  die "deploy/compose/alertmanager.yml inhibits the wrong alerts; got:"$'\n'"${got}"$'\n'"want:"$'\n'"$(sort <<<"${expected}")"
log "ok: Alertmanager pages a revoked key once, a burn once (page or ticket), per module, and keeps the warnings that explain or differ"
log "ok: ${#configs[@]} configurations, ${#rules[@]} rule files, ${#tests[@]} rule test files"
