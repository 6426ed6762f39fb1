#!/usr/bin/env bash
# End-to-end check of the dashboards and rules against real Prometheus
# servers: Debian's 2.42 and Prometheus 3.16.
#
# Builds the exporter with scripts/build.sh and starts it with --demo (its
# /metrics target watches an embedded sample service) and a --config.file
# whose module lets /probe read two more sample services
# (bench/cmd/fakeapi, one process each). Each Prometheus scrapes the
# exporter every second with the rules of deploy/prometheus/rules loaded:
#   Debian's 2.42:   job deployment_service (/metrics) and job
#                    deployment_service_probe (/probe, both services), all
#                    with classic histograms;
#   Prometheus 3.16: /metrics three times, as deployment_service (native
#                    histograms and the classic buckets), deployment_service_native
#                    (native only) and deployment_service_classic (classic
#                    only), and deployment_service_probe (native only).
# Then tools/cmd/promqlcheck sends every PromQL expression of
# grafana/dashboards, the recording rules and the alert rules to the query
# API: dashboard and recording expressions must parse and return data, alert
# expressions must evaluate; and again for each target, so that every
# dashboard query and recording rule returns data for every /metrics job and
# every /probe target, and the exporter row for every exporter job.
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

prometheus3_module=github.com/prometheus/prometheus
prometheus3_version=v0.316.0 # Prometheus 3.16.0

# prometheus3_binary DIR: prints the path of a Prometheus 3.16 binary,
# building it when there is none. The remove_all_sd tag leaves out the
# service discoveries, whose dependencies the module proxy does not all
# serve; static_configs are all this check needs. The web UI has no assets
# in such a build; the HTTP API works.
prometheus3_binary() {
  local dir=$1 gobin bin
  if [[ -n "${PROMETHEUS3_BIN:-}" ]]; then
    [[ -x "${PROMETHEUS3_BIN}" ]] || die "PROMETHEUS3_BIN=${PROMETHEUS3_BIN} is not an executable"
    echo "${PROMETHEUS3_BIN}"
    return 0
  fi
  gobin=$(go env GOBIN)
  [[ -n "${gobin}" ]] || gobin="$(go env GOPATH)/bin"
  bin="${gobin}/prometheus"
  if [[ -x "${bin}" ]] && go version -m "${bin}" 2>/dev/null |
    grep -qE "^[[:space:]]+mod[[:space:]]+${prometheus3_module}[[:space:]]+${prometheus3_version}([[:space:]]|$)"; then
    echo "${bin}"
    return 0
  fi
  log "building Prometheus ${prometheus3_version} into ${gobin} (4-8 minutes on 2 cores; later runs reuse it)"
  (cd "${dir}" && GOFLAGS=-mod=mod go install -tags remove_all_sd \
    "${prometheus3_module}/cmd/prometheus@${prometheus3_version}") >&2
  echo "${bin}"
}

work=$(mktemp -d)
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do
    kill "${pid}" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "${pid}" 2>/dev/null || true
  done
  if [[ ${status} -ne 0 ]]; then
    for f in "${work}"/*.log; do
      [[ -s "${f}" ]] && { log "last lines of $(basename "${f}"):"; tail -n 30 "${f}" >&2; }
    done
  fi
  rm -rf "${work}"
  exit "${status}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

exporter=$(exporter_binary "${work}")
promqlcheck=$(tools_binary promqlcheck "${work}")
(cd "${repo}" && go build -o "${work}/fakeapi" ./bench/cmd/fakeapi)
prometheus3=
[[ " ${E2E_PROMETHEUS:-3.16} " == *" 3.16 "* ]] && prometheus3=$(prometheus3_binary "${work}")

# scripts/build.sh put the version information in through -ldflags.
version=$("${exporter}" --version 2>&1) || die "${exporter} --version failed: ${version}"
grep -qE 'build date: +[0-9]{4}-[0-9]{2}-[0-9]{2}T' <<<"${version}" ||
  die "the binary carries no build date; are the -X ldflags of scripts/build.sh still right? ${version}"
log "ok: $(head -n 1 <<<"${version}")"

# Two sample services for /probe. fakeapi runs until its stdin closes: each
# reads a FIFO that this script holds open until it exits.
key=e2e-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "${key}" >"${work}/key"
chmod 600 "${work}/key"
probe_urls=()
fifo_fds=() # held open until the script exits, which ends the services
for name in svc1 svc2; do
  mkfifo "${work}/${name}.stdin"
  "${work}/fakeapi" -key "${key}" -page-size 50 -latency 2ms -jitter 10ms \
    <"${work}/${name}.stdin" >"${work}/${name}.json" 2>"${work}/${name}.log" &
  pids+=($!)
  exec {fd}>"${work}/${name}.stdin"
  fifo_fds+=("${fd}")
  for ((i = 0; i < 100; i++)); do
    [[ -s "${work}/${name}.json" ]] && break
    sleep 0.1
  done
  url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "${work}/${name}.json")
  [[ -n "${url}" ]] || die "sample service ${name} did not start"
  probe_urls+=("${url}")
done
log "ok: ${#fifo_fds[@]} sample services for /probe at ${probe_urls[*]}"

cat >"${work}/modules.yml" <<YAML
modules:
  default:
    http_client_config:
      authorization:
        type: Token
        credentials_file: ${work}/key
    timeout: 5s
    locations:
      detail_limit: 5
      info_fields: [name]
YAML

exporter_port=$(free_port)
exporter_addr="127.0.0.1:${exporter_port}"
log "starting the exporter in demo mode with /probe modules on ${exporter_addr}"
"${exporter}" --demo \
  --locations.detail-limit=5 \
  --locations.info-field=name \
  --config.file="${work}/modules.yml" \
  --web.listen-address="${exporter_addr}" \
  --log.level=debug >"${work}/exporter.log" 2>&1 &
pids+=($!)
wait_http "http://${exporter_addr}/-/healthy" 30 || die "exporter did not answer /-/healthy"
wait_http "http://${exporter_addr}/-/ready" 30 || die "exporter did not answer /-/ready"
log "ok: /-/healthy and /-/ready answer 200"
for url in "${probe_urls[@]}"; do
  curl -fsS --get --data-urlencode "target=${url}" "http://${exporter_addr}/probe" |
    grep -q '^deployment_service_up 1$' || die "/probe?target=${url} does not answer deployment_service_up 1"
done
log "ok: /probe reads both sample services"

# scrape_job NAME PATH EXTRA: one scrape job of the exporter, as YAML.
scrape_job() {
  local name=$1 path=$2 extra=$3 targets
  if [[ "${path}" == /probe ]]; then
    targets=$(printf '"%s", ' "${probe_urls[@]}")
    cat <<YAML
  - job_name: ${name}
    metrics_path: /probe
${extra}
    static_configs:
      - targets: [${targets%, }]
    relabel_configs:
      - source_labels: [__address__]
        target_label: __param_target
      - source_labels: [__param_target]
        target_label: instance
      - target_label: __address__
        replacement: ${exporter_addr}
YAML
  else
    cat <<YAML
  - job_name: ${name}
${extra}
    static_configs:
      - targets: ["${exporter_addr}"]
YAML
  fi
}

# instant_count URL EXPR: prints the value of count(EXPR), 0 when empty.
instant_count() {
  curl -fsS --get --data-urlencode "query=count(${2})" "${1}/api/v1/query" |
    jq -r '.data.result[0].value[1] // "0"'
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

  local n_targets=$((${#metrics_jobs[@]} + ${#probe_urls[@]}))
  args=(-prometheus "http://127.0.0.1:${port}" -wait-timeout 90s
    -wait "count(up == 1) == ${n_targets}"
    -wait "count(count_over_time(deployment_service_up[1m]) >= 8) == ${n_targets}")
  for d in "${repo}"/grafana/dashboards/*.json; do args+=(-dashboard "${d}"); done
  for r in "${repo}"/deploy/prometheus/rules/*.yml; do args+=(-rules "${r}"); done
  for j in "${metrics_jobs[@]}"; do
    args+=(-target "job=${j},instance=${exporter_addr}" -vars "exporter_job=${j}")
  done
  for url in "${probe_urls[@]}"; do args+=(-target "job=${probe_job},instance=${url}"); done

  status=0
  "${promqlcheck}" "${args[@]}" || status=$?

  # The checks above pass vacuously unless each job really stored the
  # histogram as its scrape configuration asked.
  local l job want got h="deployment_service_request_duration_seconds"
  for l in ${layouts}; do
    job=${l%%=*} want=${l#*=} got=
    [[ $(instant_count "http://127.0.0.1:${port}" "${h}{job=\"${job}\"}") != 0 ]] && got=native
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
  jobs2=$(scrape_job deployment_service /metrics "" && scrape_job deployment_service_probe /probe "")
  check_with prometheus2 "${prometheus2}" "${jobs2}" "deployment_service=classic" \
    deployment_service_probe deployment_service ||
    failed+=("Prometheus 2.42")
fi

if [[ " ${versions} " == *" 3.16 "* ]]; then
  native='    scrape_native_histograms: true'
  both=$'    scrape_native_histograms: true\n    always_scrape_classic_histograms: true'
  classic='    scrape_native_histograms: false'
  jobs3=$(scrape_job deployment_service /metrics "${both}" &&
    scrape_job deployment_service_native /metrics "${native}" &&
    scrape_job deployment_service_classic /metrics "${classic}" &&
    scrape_job deployment_service_probe /probe "${native}")
  check_with prometheus3 "${prometheus3}" "${jobs3}" \
    "deployment_service=native+classic deployment_service_native=native deployment_service_classic=classic" \
    deployment_service_probe \
    deployment_service deployment_service_native deployment_service_classic ||
    failed+=("Prometheus 3.16")
fi

[[ ${#failed[@]} -eq 0 ]] || die "dashboard or rule queries failed with ${failed[*]} (see FAIL lines above)"
log "ok: every dashboard and rule query works on Prometheus ${versions}, for /metrics and /probe targets"
