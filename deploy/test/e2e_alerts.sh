#!/usr/bin/env bash
# End-to-end check of what on-call gets: Debian's Prometheus 2.42 (with
# --web.external-url) and Alertmanager with the shipped rules
# (deploy/prometheus/rules) and Alertmanager configuration
# (deploy/compose/alertmanager.yml, its receiver pointed at a webhook
# receiver of this script's own, group_wait cut to 5s and group_interval to
# 30s), one cause per target, on /metrics and on /probe alike.
# /metrics: one exporter per cause, each with --demo, --demo.fault and
# --web.external-url:
#   key       root, projects and locations answer 401 (a revoked key)
#   outage    root answers 500
#   throttled locations answers 429 with Retry-After: 60
#   slow      projects answers after 2.5 s
#   detail    the detail view of location 3 answers 404
# /probe: one exporter with --config.file and --web.external-url, two sample
# services (bench/cmd/fakeapi, one answering after 2.5 s), scraped as the
# shipped prometheus-probe.yml does (module from params, as a label):
#   pkey      module badkey sends a wrong key (401); fixed later
#   prefused  module refused polls a port where nothing listens
#   pslow     module slow polls the service answering after 2.5 s
#   pdetail   module good checks location 99999, which answers 404
# Prometheus stores the classic histogram only (2.42 has no native ones).
# The shipped `for:` durations stay: the alerts that need 10 minutes or more
# are checked while pending (Prometheus renders their texts then too). What
# must hold:
#   - the receiver gets one page per cause: DeploymentServiceAPIKeyRefused
#     for the key (its burn-rate page, which fires too, is inhibited), the
#     burn-rate page for the outage, the throttled service and the refused
#     connection, nothing critical for the slow service or the failing
#     detail view;
#   - once the key works again, its burn-rate page, still firing, stays held;
#   - every alert about a target, pending or received, carries the module
#     of its /probe target and links the exporter's page about that target
#     (the page label of deployment_service_target_info), which answers 200;
#     ExporterDown links Prometheus' targets page, which answers 200;
#   - the numbers are within 20%: the slow endpoint reads between 2 and 3 s,
#     the hold-off ends at most 72 s after the check; the texts name the
#     statuses (401, 500, 429, 404), the failing location, the cause of the
#     refused connection and the Retry-After;
#   - no text claims more of the error budget than the minutes of data seen;
#   - the dashboard's budget and availability panels quote the budget used
#     that the page quotes (within 20%), and no value for a target without data.
# About 7 minutes on 2 busy cores: the burn-rate page of a full outage needs
# about 4 minutes of it, on a Prometheus that has just started as on any
# other.
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
# Each cause's target: its instance label and, on /probe, its module.
declare -A addr inst mod epid
metrics_causes=(key outage throttled slow detail)
probe_causes=(pkey prefused pslow pdetail)
targets=""
for cause in "${metrics_causes[@]}"; do
  port=$(free_port)
  addr[${cause}]="127.0.0.1:${port}" inst[${cause}]="127.0.0.1:${port}" mod[${cause}]=""
  # shellcheck disable=SC2086 # the faults are several flags
  "${exporter}" --demo ${faults[${cause}]} --web.listen-address="127.0.0.1:${port}" \
    --web.external-url="http://127.0.0.1:${port}/" >"${work}/exporter-${cause}.log" 2>&1 &
  pids+=($!)
  epid[${cause}]=$!
  targets+="'127.0.0.1:${port}', "
done

# /probe: two sample services, a port where nothing listens, and an exporter
# with one module per cause.
key=e2e-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "${key}" >"${work}/key"
printf 'wrong-%s\n' "${key}" >"${work}/badkey"
chmod 600 "${work}/key" "${work}/badkey"
(cd "${repo}" && go build -o "${work}/fakeapi" ./bench/cmd/fakeapi)
start_fakeapi svc -key "${key}"
start_fakeapi slowsvc -key "${key}" -latency 2.5s
svc=$(jq -r .url "${work}/svc.json")
slowsvc=$(jq -r .url "${work}/slowsvc.json")
closed="http://127.0.0.1:$(free_port)"
[[ "${svc}" == http://127.0.0.1:* && "${slowsvc}" == http://127.0.0.1:* ]] || die "the sample services did not start"
inst[pkey]=${svc} mod[pkey]=badkey
inst[prefused]=${closed} mod[prefused]=refused
inst[pslow]=${slowsvc} mod[pslow]=slow
inst[pdetail]=${svc} mod[pdetail]=good
# module NAME TARGET KEYFILE [LOCATIONS_YAML]
module() {
  printf '  %s:\n    targets: ["%s"]\n    http_client_config:\n      authorization:\n        type: Token\n        credentials_file: %s\n    timeout: 3500ms\n    concurrency: 4\n%s' \
    "$1" "$2" "$3" "${4:-}"
}
{
  echo "modules:"
  module good "${svc}" "${work}/key" $'    locations:\n      detail_ids: [3, 99999]\n      info_fields: [name]\n'
  module badkey "${svc}" "${work}/badkey"
  module refused "${closed}" "${work}/key"
  module slow "${slowsvc}" "${work}/key"
} >"${work}/modules.yml"
"${exporter}" --config.check --config.file="${work}/modules.yml" >/dev/null || die "--config.check refuses ${work}/modules.yml"
port=$(free_port)
probe_addr="127.0.0.1:${port}"
"${exporter}" --config.file="${work}/modules.yml" --web.listen-address="${probe_addr}" \
  --web.external-url="http://${probe_addr}/" >"${work}/exporter-probe.log" 2>&1 &
pids+=($!)
targets+="'${probe_addr}', "
probe_targets=""
for cause in "${probe_causes[@]}"; do
  addr[${cause}]=${probe_addr}
  probe_targets+="      - targets: ['${inst[${cause}]}']
        labels: {__param_module: ${mod[${cause}]}}
"
done
for cause in "${metrics_causes[@]}"; do
  wait_http "http://${addr[${cause}]}/-/ready" 30 || die "the ${cause} exporter did not become ready"
done
wait_http "http://${probe_addr}/-/ready" 30 || die "the /probe exporter did not become ready"

am_port=$(free_port)
# The shipped configuration with the receiver pointed at this script's.
sed -e "s#^  - name: default\$#  - name: default\n    webhook_configs:\n      - url: http://127.0.0.1:${receiver_port}/\n        send_resolved: true#" \
  -e 's#^  group_wait: .*#  group_wait: 5s#' -e 's#^  group_interval: .*#  group_interval: 30s#' \
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
  # As deploy/prometheus/prometheus-probe.yml, the module as a target label.
  - job_name: deployment_service_probe
    metrics_path: /probe
    static_configs:
${probe_targets}    relabel_configs:
      - source_labels: [__address__]
        target_label: __param_target
      - source_labels: [__param_target]
        target_label: instance
      - target_label: __address__
        replacement: ${probe_addr}
      - source_labels: [__param_module]
        target_label: module
YAML
"${prometheus2}" --config.file="${work}/prometheus.yml" --storage.tsdb.path="${work}/data" \
  --web.listen-address="127.0.0.1:${prom_port}" --web.external-url="${prom}/" --web.console.templates="${work}" \
  --web.console.libraries="${work}" >"${work}/prometheus.log" 2>&1 &
pids+=($!)
wait_http "${prom}/-/ready" 60 || die "Prometheus did not become ready"
start=$(date +%s)
log "started $("${prometheus2}" --version 2>&1 | head -n 1), Alertmanager, a receiver, 6 exporters and 2 sample services"

# alerts_of CAUSE: the alerts Prometheus has for that cause's target
# (pending or firing), as JSON lines.
alerts_of() {
  curl -fsS "${prom}/api/v1/alerts" |
    jq -c --arg i "${inst[$1]}" --arg m "${mod[$1]}" '.data.alerts[] | select(.labels.instance == $i and (.labels.module // "") == $m)'
}

# check_link TEXT WHAT CAUSE: TEXT carries the exporter's page about the
# target of CAUSE, the page label of its target_info, and that page answers 200.
check_link() {
  local text=$1 what=$2 cause=$3 link want
  want=$(curl -fsS --get --data-urlencode "query=deployment_service_target_info{instance=\"${inst[${cause}]}\",module=\"${mod[${cause}]}\"}" "${prom}/api/v1/query" |
    jq -r '.data.result[0].metric.page // empty')
  [[ -n "${want}" ]] || die "${what}: target_info of ${inst[${cause}]} ${mod[${cause}]} has no page label"
  link=$(grep -oE "page about it: [^ ]+" <<<"${text}" | head -n 1 | cut -d' ' -f4)
  [[ "${link}" == "${want}" ]] || die "${what}: links '${link}', want the page label '${want}': ${text}"
  curl -fsS -o /dev/null --max-time 5 "${link}" || die "${what}: its link ${link} does not answer 200"
}

# check_alert JSON WHAT CAUSE: the alert carries the module of its target
# (none on /metrics) and links its page.
check_alert() {
  local got
  got=$(jq -r '.labels.module // ""' <<<"$1")
  [[ "${got}" == "${mod[$3]}" ]] || die "$2: module '${got}', want '${mod[$3]}': $1"
  check_link "$(jq -r .annotations.description <<<"$1")" "$2" "$3"
}

# wait_alert CAUSE ALERTNAME SECONDS: waits until Prometheus has that alert
# (pending or firing) for the target of CAUSE and prints it.
wait_alert() {
  local cause=$1 name=$2 secs=$3 a i
  for ((i = 0; i < secs; i += 2)); do
    a=$(alerts_of "${cause}" | jq -c --arg n "${name}" 'select(.labels.alertname == $n)' | head -n 1)
    [[ -n "${a}" ]] && { echo "${a}"; return 0; }
    sleep 2
  done
  die "no ${name} for ${cause} after ${secs}s; it has: $(alerts_of "${cause}" | jq -r .labels.alertname | sort -u | tr '\n' ' ')"
}

# Pending (or firing) alerts and their texts.
for cause in key pkey; do
  a=$(wait_alert "${cause}" DeploymentServiceAPIKeyRefused 60)
  d=$(jq -r .annotations.description <<<"${a}")
  grep -q "root (HTTP 401)" <<<"${d}" || die "APIKeyRefused of ${cause} names no 'root (HTTP 401)': ${d}"
  check_alert "${a}" "APIKeyRefused of ${cause}" "${cause}"
done

for cause in slow pslow; do
  a=$(wait_alert "${cause}" DeploymentServiceAPISlow 60)
  v=$(jq -r .value <<<"${a}")
  jq -en --arg v "${v}" '($v | tonumber) >= 2 and ($v | tonumber) <= 3' >/dev/null ||
    die "APISlow of ${cause} reads ${v}s for an endpoint that answers in 2.5s (want 2 to 3s)"
  [[ ${cause} == pslow || "$(jq -r .labels.endpoint <<<"${a}")" == projects ]] || die "APISlow is about $(jq -r .labels.endpoint <<<"${a}"), not projects"
  check_alert "${a}" "APISlow of ${cause}" "${cause}"
  log "ok: APISlow of ${cause} reads $(printf '%.2f' "${v}")s for the 2.5 s endpoint"
done

for cause in detail pdetail; do
  id=3
  [[ ${cause} == pdetail ]] && id=99999
  a=$(wait_alert "${cause}" DeploymentServiceLocationDetailFailing 60)
  s=$(jq -r .annotations.summary <<<"${a}")
  d=$(jq -r .annotations.description <<<"${a}")
  [[ "$(jq -r .labels.location_id <<<"${a}")" == "${id}" ]] || die "LocationDetailFailing of ${cause} is about location $(jq -r .labels.location_id <<<"${a}"), not ${id}"
  grep -q "(HTTP 404)" <<<"${s}" || die "LocationDetailFailing of ${cause} names no status: ${s}"
  grep -q "location ${id} " <<<"${d}" || die "LocationDetailFailing of ${cause} does not name location ${id} among the failing: ${d}"
  name=$(curl -fsS --get --data-urlencode "query=deployment_service_location_info{instance=\"${inst[${cause}]}\",location_id=\"${id}\"}" "${prom}/api/v1/query" |
    jq -r '.data.result[0].metric.name // empty')
  [[ -n "${name}" ]] && { grep -qF "(${name})" <<<"${s}" || die "LocationDetailFailing does not name location ${id} (${name}): ${s}"; }
  check_alert "${a}" "LocationDetailFailing of ${cause}" "${cause}"
done

# The Retry-After comes from a subquery whose 5 s steps may not reach the
# first poll's sample yet: the texts are read again for up to 20 s.
for ((i = 0; i < 10; i++)); do
  a=$(wait_alert throttled DeploymentServiceThrottled 60)
  s=$(jq -r .annotations.summary <<<"${a}")
  grep -q "HTTP 429 with Retry-After [0-9]" <<<"${s}" && break
  sleep 2
done
grep -q "HTTP 429 with Retry-After [0-9]" <<<"${s}" || die "Throttled quotes no status and Retry-After: ${s}"
grep -q "keeps asking" <<<"${s} $(jq -r .annotations.description <<<"${a}")" && die "Throttled still says 'keeps asking': ${s}"
left=$(jq -r --argjson now "$(date +%s)" '(.value | tonumber) - $now' <<<"${a}")
jq -en --argjson l "${left}" '$l > -10 and $l <= 72' >/dev/null || die "Throttled's hold-off ends ${left}s from now (Retry-After: 60)"
check_alert "${a}" "Throttled" throttled
log "ok: every pending alert names its status, carries its module and links a page that answers 200"

# received CAUSE: "alertname severity status" of every alert the receiver got
# for the target of CAUSE.
received() {
  jq -r --arg i "${inst[$1]}" --arg m "${mod[$1]}" \
    '.alerts[] | select(.labels.instance == $i and (.labels.module // "") == $m) | "\(.labels.alertname) \(.labels.severity) \(.status)"' \
    "${work}/received.jsonl" | sort -u
}
# firing CAUSE ALERTNAME: how many series of that alert fire in Prometheus
# for the target of CAUSE (critical ones for the burn-rate alert).
firing() {
  curl -fsS --get --data-urlencode "query=ALERTS{alertname=\"$2\",alertstate=\"firing\",instance=\"${inst[$1]}\",module=\"${mod[$1]}\",severity=\"critical\"}" \
    "${prom}/api/v1/query" | jq '.data.result | length'
}

# The pages: APIKeyRefused after its 2 minutes, the burn-rate pages after
# about 4 minutes of failed polls.
for ((i = 0; i < 330; i += 5)); do
  received key | grep -q "^DeploymentServiceAPIKeyRefused critical firing" &&
    received pkey | grep -q "^DeploymentServiceAPIKeyRefused critical firing" &&
    received outage | grep -q "^DeploymentServiceErrorBudgetBurn critical firing" &&
    received throttled | grep -q "^DeploymentServiceErrorBudgetBurn critical firing" &&
    received prefused | grep -q "^DeploymentServiceErrorBudgetBurn critical firing" && break
  sleep 5
done
log "waited $(($(date +%s) - start))s for the pages"
# The keys' burn-rate pages fired too, and Alertmanager held them.
status=0
for cause in key pkey; do
  key_burn=0
  for ((i = 0; i < 30; i += 2)); do
    key_burn=$(firing "${cause}" DeploymentServiceErrorBudgetBurn)
    [[ "${key_burn}" -gt 0 ]] && break
    sleep 2
  done
  [[ "${key_burn}" -gt 0 ]] || { log "FAIL: the burn-rate page of ${cause} never fired: its inhibition went untested"; status=1; }
done

# The dashboard agrees with the page: its "Error budget left" and
# "Availability over the SLO window", for the same target at the same time,
# quote the budget used that the burn-rate page quotes, within 20%; for a
# target without data they have no value.
dashboard="${repo}/grafana/dashboards/deployment_service.json"
# panel_value TITLE JOB INSTANCE: the value of that stat panel's query.
panel_value() {
  local expr
  expr=$(jq -r --arg t "$1" '.panels[] | select(.title == $t and .type == "stat") | .targets[0].expr' "${dashboard}")
  [[ -n "${expr}" ]] || die "the dashboard has no stat panel '$1'"
  expr=${expr//\$job/$2}
  expr=${expr//\$instance/$3}
  curl -fsS --get --data-urlencode "query=${expr}" "${prom}/api/v1/query" | jq -r '.data.result[0].value[1] // "none"'
}
for cause in outage prefused; do
  a=$(alerts_of "${cause}" | jq -c 'select(.labels.alertname == "DeploymentServiceErrorBudgetBurn" and .labels.severity == "critical")' | head -n 1)
  job=$(jq -r .labels.job <<<"${a}")
  page=$(jq -r .annotations.description <<<"${a}" | grep -oE "used [0-9.]+% of the error budget" | grep -oE "[0-9.]+")
  left=$(panel_value "Error budget left" "${job}" "${inst[${cause}]}")
  avail=$(panel_value "Availability over the SLO window" "${job}" "${inst[${cause}]}")
  jq -en --arg p "${page:-x}" --arg l "${left}" --arg a "${avail}" \
    '($p | tonumber) as $p | (100 * (1 - ($l | tonumber))) as $u | ((1 - ($a | tonumber)) / 0.005 * 100) as $v
     | ($u - $p | fabs) <= 0.2 * $p and ($v - $p | fabs) <= 0.2 * $p' >/dev/null ||
    { log "FAIL: ${cause}: the page says the budget used is ${page:-unknown}%, the dashboard's budget left ${left}, its availability ${avail}"; status=1; }
  log "ok: ${cause}: the page quotes ${page}% of the budget used, the dashboard's budget left is ${left}, its availability ${avail}"
done
for title in "Error budget left" "Availability over the SLO window"; do
  [[ $(panel_value "${title}" deployment_service 127.0.0.1:1) == none ]] || { log "FAIL: '${title}' has a value for a target without data"; status=1; }
done

# The key of module badkey works again: the burn-rate page of its refused
# polls, still firing, stays held (APIKeyRefused keeps firing for it).
cp "${work}/key" "${work}/badkey"
fixed=$(date +%s)
for ((i = 0; i < 60; i += 5)); do
  [[ $(curl -fsS --get --data-urlencode "query=deployment_service_up{instance=\"${svc}\",module=\"badkey\"}" "${prom}/api/v1/query" |
    jq -r '.data.result[0].value[1] // 0') == 1 ]] && break
  sleep 5
done
sleep 75 # more than two group_intervals of the test's Alertmanager
[[ $(firing pkey DeploymentServiceErrorBudgetBurn) -gt 0 ]] ||
  { log "FAIL: the burn-rate page of pkey stopped within $(($(date +%s) - fixed))s of the fix: its hold went untested"; status=1; }
[[ $(firing pkey DeploymentServiceAPIKeyRefused) -gt 0 ]] ||
  { log "FAIL: APIKeyRefused of pkey resolved within $(($(date +%s) - fixed))s of the fix, releasing the burn-rate page"; status=1; }
log "ok: $(($(date +%s) - fixed))s after the key of pkey works again, its burn-rate page still fires and is held"

declare -A want=(
  [key]="DeploymentServiceAPIKeyRefused"
  [outage]="DeploymentServiceErrorBudgetBurn"
  [throttled]="DeploymentServiceErrorBudgetBurn"
  [slow]=""
  [detail]=""
  [pkey]="DeploymentServiceAPIKeyRefused"
  [prefused]="DeploymentServiceErrorBudgetBurn"
  [pslow]=""
  [pdetail]=""
)
for cause in "${metrics_causes[@]}" "${probe_causes[@]}"; do
  got=$(received "${cause}" | awk '$2 == "critical" && $3 == "firing" {print $1}' | sort -u | tr '\n' ' ')
  if [[ "${got% }" == "${want[${cause}]}" ]]; then
    log "ok: ${cause}: pages: ${got:-none}"
  else
    log "FAIL: ${cause}: pages '${got% }', want '${want[${cause}]}'"
    status=1
  fi
  received "${cause}" | grep -q "^DeploymentServiceErrorBudgetBurn" && [[ ${cause} == *key ]] &&
    { log "FAIL: the burn-rate alert of ${cause} was not inhibited"; status=1; }
done

# Every alert received carries its module and links its page, which
# answers 200; no text claims more of the budget than the data seen; the
# refused connection is named.
while read -r line; do
  cause=
  for c in "${!inst[@]}"; do
    jq -e --arg i "${inst[${c}]}" --arg m "${mod[${c}]}" '.labels.instance == $i and (.labels.module // "") == $m' <<<"${line}" >/dev/null && cause=${c}
  done
  [[ -n "${cause}" ]] || continue
  what="received $(jq -r '"\(.labels.alertname) (\(.labels.severity))"' <<<"${line}") for ${cause}"
  d=$(jq -r .annotations.description <<<"${line}")
  check_alert "${line}" "${what}" "${cause}"
  if grep -qE "is spent|Over the last 30 days" <<<"${d}"; then
    log "FAIL: ${what} claims more than the minutes of data seen: ${d}"
    status=1
  fi
  if [[ ${cause} == prefused ]] && ! grep -q "connection refused" <<<"${d}"; then
    log "FAIL: ${what} does not name the cause 'connection refused': ${d}"
    status=1
  fi
done < <(jq -c '.alerts[]' "${work}/received.jsonl")

# The exporter of the detail cause goes away: ExporterDown (pending) links
# Prometheus' targets page, which answers, and not the exporter's own.
kill "${epid[detail]}"
a=$(wait_alert detail DeploymentServiceExporterDown 60)
d=$(jq -r .annotations.description <<<"${a}")
link=$(grep -oE "targets page: [^ ]+" <<<"${d}" | cut -d' ' -f3)
[[ "${link}" == "${prom}/targets" ]] || die "ExporterDown links '${link}', want ${prom}/targets: ${d}"
# Debian's 2.42 is built without the React UI, which serves /targets
# upstream (2.x and 3.x alike): there the classic page stands in for it.
curl -fsS -o /dev/null --max-time 5 "${link}" || curl -fsS -o /dev/null --max-time 5 "${prom}/classic/targets" ||
  die "ExporterDown's link ${link} does not answer 200"
grep -q "${addr[detail]}/" <<<"${d}" && die "ExporterDown links the exporter that is down: ${d}"
log "ok: ExporterDown links ${link}, which answers 200"

[[ ${status} -eq 0 ]] || die "on-call would have been misled (see FAIL lines above); received:
$(jq -r '.alerts[] | "\(.status) \(.labels.alertname) \(.labels.severity) \(.labels.instance) \(.labels.module // "")"' "${work}/received.jsonl")"
log "ok: one page per cause on /metrics and /probe, none after the key's fix, every alert with its module and a link that answers 200, numbers within 20%, in $(($(date +%s) - start))s"
