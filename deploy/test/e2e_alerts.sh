#!/usr/bin/env bash
# End-to-end check of what on-call gets: Debian's Prometheus 2.42 and
# Alertmanager with the shipped rules (deploy/prometheus/rules) and
# Alertmanager configuration (deploy/compose/alertmanager.yml, its receiver
# pointed at a webhook receiver of this script's own and group_wait cut to
# 5s), and one exporter per cause, each with --demo, --demo.fault and
# --web.external-url:
#   key       root, projects and locations answer 401 (a revoked key)
#   outage    root answers 500
#   throttled locations answers 429 with Retry-After: 60
#   slow      projects answers after 2.5 s
#   detail    the detail view of location 3 answers 404
# Prometheus stores the classic histogram only (2.42 has no native ones).
# The shipped `for:` durations stay: the alerts that need 10 minutes or more
# are checked while pending (Prometheus renders their texts then too). What
# must hold:
#   - the receiver gets one page per cause: DeploymentServiceAPIKeyRefused
#     for the key (its burn-rate page, which fires too, is inhibited), the
#     burn-rate page for the outage and for the throttled service, nothing
#     critical for the slow service or the failing detail view;
#   - every alert, pending or received, links the exporter's page about its
#     target (the page label of deployment_service_target_info), and the
#     link answers 200;
#   - the numbers are within 20%: the slow endpoint reads between 2 and 3 s,
#     the hold-off ends at most 72 s after the check; the texts name the
#     statuses (401, 500, 429, 404) and the failing location's name;
#   - no text claims more of the error budget than the minutes of data seen.
# About 5 minutes (283 s on 2 busy cores): the burn-rate page of a full
# outage needs about 4 minutes of it, on a Prometheus that has just started
# as on any other.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_apt promtool prometheus
ensure_apt prometheus-alertmanager prometheus-alertmanager
ensure_apt curl curl
ensure_apt jq jq
ensure_apt python3 python3-minimal
prometheus2=/usr/bin/prometheus
[[ -x "${prometheus2}" ]] || die "Debian's prometheus package left no ${prometheus2}"

start_work
exporter=$(exporter_binary "${work}")

# The webhook receiver: one JSON notification per line in received.jsonl.
receiver_port=$(free_port)
python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open(sys.argv[1], "ab") as f:
            f.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), H).serve_forever()
' "${work}/received.jsonl" "${receiver_port}" >"${work}/receiver.log" 2>&1 &
pids+=($!)
touch "${work}/received.jsonl"

declare -A faults=(
  [key]="--demo.fault=root:401 --demo.fault=projects:401 --demo.fault=locations:401"
  [outage]="--demo.fault=root:500"
  [throttled]="--demo.fault=locations:429/60"
  [slow]="--demo.fault=projects:delay/2.5s"
  [detail]="--demo.fault=location_detail/3:404"
)
declare -A addr
targets=""
for cause in key outage throttled slow detail; do
  port=$(free_port)
  addr[${cause}]="127.0.0.1:${port}"
  # shellcheck disable=SC2086 # the faults are several flags
  "${exporter}" --demo ${faults[${cause}]} --web.listen-address="127.0.0.1:${port}" \
    --web.external-url="http://127.0.0.1:${port}/" >"${work}/exporter-${cause}.log" 2>&1 &
  pids+=($!)
  targets+="'127.0.0.1:${port}', "
done
for cause in "${!addr[@]}"; do
  wait_http "http://${addr[${cause}]}/-/ready" 30 || die "the ${cause} exporter did not become ready"
done

am_port=$(free_port)
# The shipped configuration with the receiver pointed at this script's.
sed -e "s#^  - name: default\$#  - name: default\n    webhook_configs:\n      - url: http://127.0.0.1:${receiver_port}/\n        send_resolved: true#" \
  -e 's#^  group_wait: .*#  group_wait: 5s#' \
  "${repo}/deploy/compose/alertmanager.yml" >"${work}/alertmanager.yml"
grep -q "127.0.0.1:${receiver_port}" "${work}/alertmanager.yml" || die "the receiver is not in ${work}/alertmanager.yml"
prometheus-alertmanager --config.file="${work}/alertmanager.yml" --storage.path="${work}/am" \
  --web.listen-address="127.0.0.1:${am_port}" --cluster.listen-address= >"${work}/alertmanager.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:${am_port}/-/ready" 30 || die "Alertmanager did not become ready"

prom_port=$(free_port)
prom="http://127.0.0.1:${prom_port}"
# The slow service answers in 2.5 s: the scrape timeout leaves room for it.
cat >"${work}/prometheus.yml" <<YAML
global:
  scrape_interval: 4s
  scrape_timeout: 4s
  evaluation_interval: 2s
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:${am_port}']
rule_files:
  - ${repo}/deploy/prometheus/rules/*.yml
scrape_configs:
  - job_name: deployment_service
    static_configs:
      - targets: [${targets%, }]
YAML
"${prometheus2}" --config.file="${work}/prometheus.yml" --storage.tsdb.path="${work}/data" \
  --web.listen-address="127.0.0.1:${prom_port}" --web.console.templates="${work}" \
  --web.console.libraries="${work}" >"${work}/prometheus.log" 2>&1 &
pids+=($!)
wait_http "${prom}/-/ready" 60 || die "Prometheus did not become ready"
start=$(date +%s)
log "started $("${prometheus2}" --version 2>&1 | head -n 1), Alertmanager, a receiver and 5 exporters"

# alerts_of CAUSE: the alerts Prometheus has for that exporter (pending or
# firing), as JSON lines.
alerts_of() {
  curl -fsS "${prom}/api/v1/alerts" | jq -c --arg i "${addr[$1]}" '.data.alerts[] | select(.labels.instance == $i)'
}

# check_link TEXT WHAT: TEXT carries the exporter's page about its target,
# the page label of its target_info, and that page answers 200.
check_link() {
  local text=$1 what=$2 cause=$3 link want
  want=$(curl -fsS --get --data-urlencode "query=deployment_service_target_info{instance=\"${addr[${cause}]}\"}" "${prom}/api/v1/query" |
    jq -r '.data.result[0].metric.page // empty')
  [[ -n "${want}" ]] || die "${what}: target_info of ${addr[${cause}]} has no page label"
  link=$(grep -oE "page about it: [^ ]+" <<<"${text}" | head -n 1 | cut -d' ' -f4)
  [[ "${link}" == "${want}" ]] || die "${what}: links '${link}', want the page label '${want}': ${text}"
  curl -fsS -o /dev/null --max-time 5 "${link}" || die "${what}: its link ${link} does not answer 200"
}

# wait_alert CAUSE ALERTNAME SECONDS: waits until Prometheus has that alert
# (pending or firing) for the exporter of CAUSE and prints it.
wait_alert() {
  local cause=$1 name=$2 secs=$3 a i
  for ((i = 0; i < secs; i += 2)); do
    a=$(alerts_of "${cause}" | jq -c --arg n "${name}" 'select(.labels.alertname == $n)' | head -n 1)
    [[ -n "${a}" ]] && { echo "${a}"; return 0; }
    sleep 2
  done
  die "no ${name} for the ${cause} exporter after ${secs}s; it has: $(alerts_of "${cause}" | jq -r .labels.alertname | sort -u | tr '\n' ' ')"
}

# Pending (or firing) alerts and their texts.
a=$(wait_alert key DeploymentServiceAPIKeyRefused 60)
d=$(jq -r .annotations.description <<<"${a}")
grep -q "root (HTTP 401" <<<"${d}" || die "APIKeyRefused names no 'root (HTTP 401': ${d}"
check_link "${d}" "APIKeyRefused" key

a=$(wait_alert slow DeploymentServiceAPISlow 60)
v=$(jq -r .value <<<"${a}")
jq -en --arg v "${v}" '($v | tonumber) >= 2 and ($v | tonumber) <= 3' >/dev/null ||
  die "APISlow reads ${v}s for an endpoint that answers in 2.5s (want 2 to 3s)"
[[ "$(jq -r .labels.endpoint <<<"${a}")" == projects ]] || die "APISlow is about $(jq -r .labels.endpoint <<<"${a}"), not projects"
check_link "$(jq -r .annotations.description <<<"${a}")" "APISlow" slow
log "ok: APISlow reads $(printf '%.2f' "${v}")s for the 2.5 s endpoint, with classic buckets alone"

a=$(wait_alert detail DeploymentServiceLocationDetailFailing 60)
s=$(jq -r .annotations.summary <<<"${a}")
d=$(jq -r .annotations.description <<<"${a}")
[[ "$(jq -r .labels.location_id <<<"${a}")" == 3 ]] || die "LocationDetailFailing is about location $(jq -r .labels.location_id <<<"${a}"), not 3"
grep -q "(HTTP 404)" <<<"${s}" || die "LocationDetailFailing names no status: ${s}"
name=$(curl -fsS --get --data-urlencode "query=deployment_service_location_info{instance=\"${addr[detail]}\",location_id=\"3\"}" "${prom}/api/v1/query" |
  jq -r '.data.result[0].metric.name // empty')
[[ -n "${name}" ]] && { grep -qF "(${name})" <<<"${s}" || die "LocationDetailFailing does not name location 3 (${name}): ${s}"; }
check_link "${d}" "LocationDetailFailing" detail

a=$(wait_alert throttled DeploymentServiceThrottled 60)
s=$(jq -r .annotations.summary <<<"${a}")
grep -q "HTTP 429" <<<"${s}" || die "Throttled names no status: ${s}"
grep -q "keeps asking" <<<"${s} $(jq -r .annotations.description <<<"${a}")" && die "Throttled still says 'keeps asking': ${s}"
left=$(jq -r --argjson now "$(date +%s)" '(.value | tonumber) - $now' <<<"${a}")
jq -en --argjson l "${left}" '$l > -10 and $l <= 72' >/dev/null || die "Throttled's hold-off ends ${left}s from now (Retry-After: 60)"
check_link "$(jq -r .annotations.description <<<"${a}")" "Throttled" throttled
log "ok: every pending alert names its status and links a page that answers 200"

# received CAUSE: "alertname severity status" of every alert the receiver got
# for the exporter of CAUSE.
received() {
  jq -r --arg i "${addr[$1]}" '.alerts[] | select(.labels.instance == $i) | "\(.labels.alertname) \(.labels.severity) \(.status)"' \
    "${work}/received.jsonl" | sort -u
}

# The pages: APIKeyRefused after its 2 minutes, the burn-rate pages after
# about 4 minutes of failed polls.
for ((i = 0; i < 330; i += 5)); do
  received key | grep -q "^DeploymentServiceAPIKeyRefused critical firing" &&
    received outage | grep -q "^DeploymentServiceErrorBudgetBurn critical firing" &&
    received throttled | grep -q "^DeploymentServiceErrorBudgetBurn critical firing" && break
  sleep 5
done
log "waited $(($(date +%s) - start))s for the pages"
# The key's burn-rate page fired too, and Alertmanager held it.
key_burn=0
for ((i = 0; i < 30; i += 2)); do
  key_burn=$(curl -fsS --get --data-urlencode "query=ALERTS{alertname=\"DeploymentServiceErrorBudgetBurn\",alertstate=\"firing\",severity=\"critical\",instance=\"${addr[key]}\"}" \
    "${prom}/api/v1/query" | jq '.data.result | length')
  [[ "${key_burn}" -gt 0 ]] && break
  sleep 2
done

status=0
[[ "${key_burn}" -gt 0 ]] || { log "FAIL: the key's burn-rate page never fired: its inhibition went untested"; status=1; }
declare -A want=(
  [key]="DeploymentServiceAPIKeyRefused"
  [outage]="DeploymentServiceErrorBudgetBurn"
  [throttled]="DeploymentServiceErrorBudgetBurn"
  [slow]=""
  [detail]=""
)
for cause in key outage throttled slow detail; do
  got=$(received "${cause}" | awk '$2 == "critical" && $3 == "firing" {print $1}' | sort -u | tr '\n' ' ')
  if [[ "${got% }" == "${want[${cause}]}" ]]; then
    log "ok: ${cause}: pages: ${got:-none}"
  else
    log "FAIL: ${cause}: pages '${got% }', want '${want[${cause}]}'"
    status=1
  fi
done
received key | grep -q "^DeploymentServiceErrorBudgetBurn" && { log "FAIL: the key's burn-rate alert was not inhibited"; status=1; }

# Every alert received links its page, which answers 200; no text claims
# more of the budget than the data seen.
while read -r line; do
  cause=
  for c in "${!addr[@]}"; do [[ "$(jq -r .labels.instance <<<"${line}")" == "${addr[${c}]}" ]] && cause=${c}; done
  [[ -n "${cause}" ]] || continue
  what="received $(jq -r '"\(.labels.alertname) (\(.labels.severity))"' <<<"${line}") for ${cause}"
  d=$(jq -r .annotations.description <<<"${line}")
  check_link "${d}" "${what}" "${cause}"
  if grep -qE "is spent|Over the last 30 days" <<<"${d}"; then
    log "FAIL: ${what} claims more than the minutes of data seen: ${d}"
    status=1
  fi
done < <(jq -c '.alerts[]' "${work}/received.jsonl")
[[ ${status} -eq 0 ]] || die "on-call would have been misled (see FAIL lines above); received:
$(jq -r '.alerts[] | "\(.status) \(.labels.alertname) \(.labels.severity) \(.labels.instance)"' "${work}/received.jsonl")"
log "ok: one page per cause, every alert linked to a page that answers 200, numbers within 20%, in $(($(date +%s) - start))s"
