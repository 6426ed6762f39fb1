#!/usr/bin/env bash
# Static checks of the Prometheus and Alertmanager files:
#   promtool check config  on every Prometheus configuration (which also checks the rule files they load),
#   promtool check rules   on every rule file,
#   promtool test rules    on the rule unit tests (each alert firing and staying quiet),
#   amtool check-config    on the Alertmanager configuration of the compose stack.
# Debian's prometheus and prometheus-alertmanager packages are installed when missing.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_apt promtool prometheus
ensure_apt amtool prometheus-alertmanager

cd "${repo}"
configs=(deploy/prometheus/prometheus.yml deploy/prometheus/prometheus-probe.yml deploy/compose/prometheus.yml)
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
log "ok: ${#configs[@]} configurations, ${#rules[@]} rule files, ${#tests[@]} rule test files"
