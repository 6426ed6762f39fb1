#!/usr/bin/env bash
# End-to-end check of the dashboards and rules against real Prometheus
# servers: Debian's 2.42 and Prometheus 3.16.
#
# Starts the exporter and three sample services as lib_e2e.sh's e2e_start
# says (the /probe, 403 and /sd checks included). Each Prometheus then
# scrapes the exporter every second with the rules of deploy/prometheus/rules
# loaded, and /probe through the job deployment_service_probe of
# deploy/prometheus/prometheus-sd.yml as shipped (http_sd_configs on /sd,
# its relabelling; only the addresses and intervals changed):
#   Debian's 2.42:   job deployment_service (/metrics) and job
#                    deployment_service_probe (/probe, both services), all
#                    with classic histograms;
#   Prometheus 3.16: /metrics four times, as deployment_service (native
#                    histograms and the classic buckets), deployment_service_native
#                    (native only), deployment_service_classic (classic
#                    only) and deployment_service_nhcb (the classic buckets
#                    converted to a native histogram with custom buckets,
#                    convert_classic_histograms_to_nhcb, and not kept,
#                    always_scrape_classic_histograms: false), and
#                    deployment_service_probe (native only).
# Then tools/cmd/promqlcheck sends every PromQL expression of
# grafana/dashboards, the recording rules and the alert rules to the query
# API: dashboard and recording expressions must parse and return data, alert
# expressions must evaluate; and again for each target, so that every
# dashboard query and recording rule returns data for every /metrics job and
# every /probe target, and the exporter row for every exporter job. Through
# /api/v1/targets and the query API each Prometheus must have discovered
# exactly the listed services, each scraped through /probe with its module
# (labels module and instance, and the scrape URL's parameters) and up, and
# svc3 nowhere; svc3 must have had no request from the exporter meanwhile.
# Everything it starts is stopped on exit.
#
# Environment:
#   EXPORTER_BIN=path     use that exporter binary instead of building one
#   E2E_PROMETHEUS="2.42 3.16"  the versions to check with (the default: both)
#   PROMETHEUS3_BIN=path  use that Prometheus 3.16 binary; otherwise
#                         $(go env GOPATH)/bin/prometheus when it is v0.316.0,
#                         else it is built there first (4-8 minutes on 2 cores,
#                         reused by later runs)
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_apt curl curl
ensure_apt jq jq
# Debian's package: /usr/bin/prometheus is 2.42 whatever else is on PATH.
ensure_apt promtool prometheus
prometheus2=/usr/bin/prometheus
[[ -x "${prometheus2}" ]] || die "Debian's prometheus package left no ${prometheus2}"

start_work
# shellcheck source=deploy/test/lib_e2e.sh source-path=SCRIPTDIR
source "${repo}/deploy/test/lib_e2e.sh"

prometheus3=
[[ " ${E2E_PROMETHEUS:-3.16} " == *" 3.16 "* ]] && prometheus3=$(prometheus3_binary "${work}")
e2e_start
sd_file="${repo}/deploy/prometheus/prometheus-sd.yml"

# native_kind URL JOB: "nhcb" when the request histogram of JOB is a native
# histogram whose bucket bounds are all classic ones (custom buckets), else
# "native" (exponential buckets).
native_kind() {
  local classic
  classic=$(curl -fsS "http://${exporter_addr}/metrics" |
    sed -n 's/^deployment_service_request_duration_seconds_bucket{.*le="\([^"]*\)".*/\1/p' | sort -u | jq -R . | jq -s .)
  curl -fsS --get --data-urlencode "query=deployment_service_request_duration_seconds{job=\"$2\"}" "$1/api/v1/query" |
    jq -r --argjson classic "${classic}" '
      [.data.result[].histogram[1].buckets[][2] | select(. != "+Inf") | tonumber] as $bounds |
      if ($bounds | length) > 0 and all($bounds[]; . as $b | any($classic[]; . != "+Inf" and tonumber == $b))
      then "nhcb" else "native" end'
}

# check_with NAME BINARY JOBS_YAML LAYOUTS PROBE_JOB METRICS_JOB...: writes a
# configuration with the scrape jobs JOBS_YAML, runs that Prometheus, checks
# every expression overall, for each /metrics job and for each /probe target
# of PROBE_JOB, checks that each job of LAYOUTS ("job=native+classic ...")
# stored the request histogram as it says, and stops it.
check_with() {
  local name=$1 bin=$2 jobs_yaml=$3 layouts=$4 probe_job=$5
  shift 5
  local metrics_jobs=("$@") dir="${work}/${name}" port args pid status
  mkdir -p "${dir}"
  port=$(free_port)
  while [[ "${port}" == "${exporter_port}" ]]; do port=$(free_port); done
  cat >"${dir}/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - ${repo}/deploy/prometheus/rules/*.yml
scrape_configs:
${jobs_yaml}
YAML
  local flags=(--config.file="${dir}/prometheus.yml" --storage.tsdb.path="${dir}/data"
    --web.listen-address="127.0.0.1:${port}")
  # Debian's 2.42 looks for console templates in /etc by default.
  [[ "${bin}" == "${prometheus2}" ]] && flags+=(--web.console.templates="${dir}" --web.console.libraries="${dir}")
  log "starting $("${bin}" --version 2>&1 | head -n 1) (${name}) on 127.0.0.1:${port}"
  "${bin}" "${flags[@]}" >"${work}/${name}.log" 2>&1 &
  pid=$!
  pids+=("${pid}")
  wait_http "http://127.0.0.1:${port}/-/ready" 60 || die "${name} did not become ready"

  promqlcheck_args "http://127.0.0.1:${port}" $((${#metrics_jobs[@]} + ${#probe_urls[@]}))
  for j in "${metrics_jobs[@]}"; do
    args+=(-target "job=${j},instance=${exporter_addr}" -vars "exporter_job=${j}")
  done
  for url in "${probe_urls[@]}"; do args+=(-probe-target "job=${probe_job},instance=${url}"); done

  status=0
  "${promqlcheck}" "${args[@]}" || status=$?
  check_discovery "${name}" "http://127.0.0.1:${port}" "${probe_job}" || status=1

  # The checks above pass vacuously unless each job really stored the
  # histogram as its scrape configuration asked.
  local l job want got h="deployment_service_request_duration_seconds"
  for l in ${layouts}; do
    job=${l%%=*} want=${l#*=} got=
    [[ $(instant_count "http://127.0.0.1:${port}" "${h}{job=\"${job}\"}") != 0 ]] && got=$(native_kind "http://127.0.0.1:${port}" "${job}")
    [[ $(instant_count "http://127.0.0.1:${port}" "${h}_bucket{job=\"${job}\"}") != 0 ]] && got=${got:+${got}+}classic
    if [[ "${got}" == "${want}" ]]; then
      log "ok: ${name} job ${job} stored the request histogram as ${got}"
    else
      log "FAIL: ${name} job ${job} stored the request histogram as '${got}', want '${want}'"
      status=1
    fi
  done
  # Where both forms exist, the quantiles' `or` keeps one of them: every
  # job has as many quantile series as the others, none twice as many.
  local q="instance_endpoint:${h}:quantile_rate5m" n counts=""
  for l in ${layouts}; do
    job=${l%%=*}
    n=$(instant_count "http://127.0.0.1:${port}" "${q}{job=\"${job}\"}")
    counts+="${job}=${n} "
  done
  if [[ $(tr ' ' '\n' <<<"${counts}" | sed -n 's/.*=//p' | sort -u | wc -l) -eq 1 ]]; then
    log "ok: ${name} recorded as many latency quantiles for each job: ${counts% }"
  else
    log "FAIL: ${name} recorded a different number of latency quantiles per job: ${counts% }"
    status=1
  fi

  kill "${pid}" 2>/dev/null || true
  wait "${pid}" 2>/dev/null || true
  return "${status}"
}

versions=${E2E_PROMETHEUS:-2.42 3.16}
failed=()

if [[ " ${versions} " == *" 2.42 "* ]]; then
  jobs2=$(scrape_job deployment_service "" && sd_job "${sd_file}" "")
  check_with prometheus2 "${prometheus2}" "${jobs2}" "deployment_service=classic" \
    deployment_service_probe deployment_service ||
    failed+=("Prometheus 2.42")
fi

if [[ " ${versions} " == *" 3.16 "* ]]; then
  native='    scrape_native_histograms: true'
  both=$'    scrape_native_histograms: true\n    always_scrape_classic_histograms: true'
  classic='    scrape_native_histograms: false'
  nhcb=$'    scrape_native_histograms: false\n    convert_classic_histograms_to_nhcb: true\n    always_scrape_classic_histograms: false'
  jobs3=$(scrape_job deployment_service "${both}" &&
    scrape_job deployment_service_native "${native}" &&
    scrape_job deployment_service_classic "${classic}" &&
    scrape_job deployment_service_nhcb "${nhcb}" &&
    sd_job "${sd_file}" "${native}")
  check_with prometheus3 "${prometheus3}" "${jobs3}" \
    "deployment_service=native+classic deployment_service_native=native deployment_service_classic=classic deployment_service_nhcb=nhcb" \
    deployment_service_probe \
    deployment_service deployment_service_native deployment_service_classic deployment_service_nhcb ||
    failed+=("Prometheus 3.16")
fi

[[ ${#failed[@]} -eq 0 ]] || die "dashboard or rule queries, or the discovery through /sd, failed with ${failed[*]} (see FAIL lines above)"
[[ $(svc3_requests) == 0 ]] || die "the unlisted svc3 had $(svc3_requests) request(s) while Prometheus ran"
log "ok: svc3, listed by no module, had no request while Prometheus ran"
log "ok: every dashboard and rule query works on Prometheus ${versions}, for /metrics and /probe targets found through /sd"
