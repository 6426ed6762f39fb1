#!/usr/bin/env bash
# End-to-end check of the dashboards and rules against real Prometheus
# servers: Debian's 2.42 and Prometheus 3.16.
#
# Builds the exporter with scripts/build.sh and starts it with --demo (its
# /metrics target watches an embedded sample service) and a --config.file
# of three modules over three more sample services (bench/cmd/fakeapi, one
# process each): module default lists svc1, module second lists svc2 (in
# another spelling) and a pattern, module local only the pattern
# http://127.0.0.1:*; svc3 runs but no module lists it by name. Before any
# Prometheus runs, the exporter must answer /probe of each listed service,
# a 403 that sends svc3 nothing for module default, a probe of svc3 through
# the pattern of module local, and on /sd exactly the two listed services
# with their modules (patterns left out). Each Prometheus then scrapes the
# exporter every second with the rules of deploy/prometheus/rules loaded,
# and /probe through the job deployment_service_probe of
# deploy/prometheus/prometheus-sd.yml as shipped (http_sd_configs on /sd,
# its relabelling; only the addresses and intervals changed):
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

# Three sample services for /probe. fakeapi runs until its stdin closes:
# each reads a FIFO that this script holds open until it exits.
key=e2e-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "${key}" >"${work}/key"
chmod 600 "${work}/key"
declare -A urls controls
fifo_fds=() # held open until the script exits, which ends the services
for name in svc1 svc2 svc3; do
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
  urls[${name}]=$(jq -r .url "${work}/${name}.json")
  controls[${name}]=$(jq -r .control "${work}/${name}.json")
  [[ "${urls[${name}]}" == http://127.0.0.1:* ]] || die "sample service ${name} did not start"
done
log "ok: ${#fifo_fds[@]} sample services for /probe: svc1 ${urls[svc1]}, svc2 ${urls[svc2]}, svc3 ${urls[svc3]}"

# The services Prometheus must probe, as "module target" pairs, and their
# URLs: exactly the concrete targets of the modules below.
listed=("default ${urls[svc1]}" "second ${urls[svc2]}")
probe_urls=("${urls[svc1]}" "${urls[svc2]}")
module_yaml() {
  cat <<YAML
    http_client_config:
      authorization:
        type: Token
        credentials_file: ${work}/key
    timeout: 5s
    locations:
      detail_limit: 5
      info_fields: [name]
YAML
}
# svc2 is spelled as /probe would not: /sd hands it over in /probe's spelling.
svc2_spelling="${urls[svc2]/http:/HTTP:}/"
cat >"${work}/modules.yml" <<YAML
modules:
  default:
    targets: ["${urls[svc1]}"]
$(module_yaml)
  second:
    targets:
      - ${svc2_spelling}
      - http://localhost:*
$(module_yaml)
  local:
    targets: ["http://127.0.0.1:*"]
$(module_yaml)
YAML
"${exporter}" --config.check --config.file="${work}/modules.yml" >/dev/null || die "--config.check refuses ${work}/modules.yml"

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
for pair in "${listed[@]}"; do
  module=${pair%% *} url=${pair#* }
  curl -fsS --get --data-urlencode "target=${url}" --data-urlencode "module=${module}" "http://${exporter_addr}/probe" |
    grep -q '^deployment_service_up 1$' || die "/probe?target=${url}&module=${module} does not answer deployment_service_up 1"
done
log "ok: /probe reads both listed sample services with their modules"

# svc3_requests: prints how many requests svc3 has had since its last reset.
svc3_requests() { curl -fsS "${controls[svc3]}/stats" | jq -r .total; }
curl -fsS -X POST "${controls[svc3]}/reset"
code=$(curl -sS -o "${work}/403.txt" -w '%{http_code}' --get --data-urlencode "target=${urls[svc3]}" \
  --data-urlencode module=default "http://${exporter_addr}/probe")
[[ "${code}" == 403 ]] || die "/probe of the unlisted svc3 with module default answered ${code}, want 403: $(head -c 300 "${work}/403.txt")"
[[ $(svc3_requests) == 0 ]] || die "the refused /probe of svc3 still sent it $(svc3_requests) request(s)"
curl -fsS --get --data-urlencode "target=${urls[svc3]}" --data-urlencode module=local "http://${exporter_addr}/probe" |
  grep -q '^deployment_service_up 1$' || die "/probe of svc3 with module local (pattern http://127.0.0.1:*) does not answer deployment_service_up 1"
[[ $(svc3_requests) -gt 0 ]] || die "svc3 counted no request from the probe through module local"
curl -fsS -X POST "${controls[svc3]}/reset"
log "ok: /probe of svc3: 403 and no request with module default, read through module local's pattern"

# /sd: one group per module with concrete targets, in /probe's spelling;
# module local (a pattern only) has none.
curl -fsS "http://${exporter_addr}/sd" >"${work}/sd.json"
got=$(jq -r '.[] | select(.labels.module == .labels.__param_module) | .labels.module as $m | .targets[] | "\($m) \(.)"' \
  "${work}/sd.json" | sort)
want=$(printf '%s\n' "${listed[@]}" | sort)
[[ "${got}" == "${want}" ]] || die "/sd answers $(cat "${work}/sd.json"); want the pairs: ${want}"
[[ $(jq length "${work}/sd.json") == 2 ]] || die "/sd has $(jq length "${work}/sd.json") groups, want 2: $(cat "${work}/sd.json")"
[[ $(curl -fsS "http://${exporter_addr}/sd?module=second" | jq -r '[.[].targets[]] | join(" ")') == "${urls[svc2]}" ]] ||
  die "/sd?module=second does not answer svc2 alone"
code=$(curl -sS -o /dev/null -w '%{http_code}' "http://${exporter_addr}/sd?module=nope")
[[ "${code}" == 400 ]] || die "/sd?module=nope answered ${code}, want 400"
log "ok: /sd hands over svc1 (default) and svc2 (second), nothing of the patterns"

# scrape_job NAME EXTRA: a /metrics scrape job of the exporter, as YAML.
scrape_job() {
  local name=$1 extra=$2
  cat <<YAML
  - job_name: ${name}
${extra}
    static_configs:
      - targets: ["${exporter_addr}"]
YAML
}

# sd_job EXTRA: the /probe job of deploy/prometheus/prometheus-sd.yml as
# shipped (its last job: HTTP service discovery on the exporter's /sd and
# the relabelling), with this exporter's address, a scrape every second, a
# discovery refresh every second, and the lines EXTRA.
sd_job() {
  local job
  job=$(awk '/^  - job_name: deployment_service_probe$/ { on = 1 } on' "${repo}/deploy/prometheus/prometheus-sd.yml" |
    sed -e "s#localhost:10044#${exporter_addr}#g" -e 's/^\( *scrape_interval:\).*/\1 1s/' \
      -e 's/^\( *scrape_timeout:\).*/\1 1s/' -e 's/^\( *refresh_interval:\).*/\1 1s/' |
    EXTRA="$1" awk '{ print } /^    metrics_path: \/probe$/ && ENVIRON["EXTRA"] != "" { print ENVIRON["EXTRA"] }')
  grep -q "url: http://${exporter_addr}/sd$" <<<"${job}" && grep -q 'refresh_interval: 1s' <<<"${job}" &&
    grep -q "replacement: ${exporter_addr}$" <<<"${job}" ||
    die "deploy/prometheus/prometheus-sd.yml has no job deployment_service_probe of the shape this check adapts: ${job}"
  printf '%s\n' "${job}"
}

# instant_count URL EXPR: prints the value of count(EXPR), 0 when empty.
instant_count() {
  curl -fsS --get --data-urlencode "query=count(${2})" "${1}/api/v1/query" |
    jq -r '.data.result[0].value[1] // "0"'
}

# check_discovery NAME PROMETHEUS_URL JOB: the /probe job JOB of that
# Prometheus found its targets through /sd: exactly the listed services,
# each scraped through /probe with its module and up, and svc3 nowhere in
# its targets, active or dropped. Says what is wrong and returns 1, or 0.
check_discovery() {
  local name=$1 prom=$2 job=$3 want got n
  curl -fsS "${prom}/api/v1/targets" >"${work}/${name}-targets.json"
  want=$(printf '%s\n' "${listed[@]}" | sort)
  # Each active target of the job: its module and instance, when the scrape
  # URL is /probe of the exporter with that module and instance as target,
  # and it is up; else what it is.
  got=$(jq -r --arg job "${job}" --arg exporter "${exporter_addr}" '
    .data.activeTargets[] | select(.labels.job == $job) |
    (.labels.instance | @uri) as $target | .labels.module as $mod |
    if (.scrapeUrl | startswith("http://\($exporter)/probe?")) and
       (.scrapeUrl | test("[?&]module=\($mod)(&|$)")) and
       (.scrapeUrl | contains("target=\($target)")) and .health == "up"
    then "\(.labels.module) \(.labels.instance)"
    else "WRONG: \(.scrapeUrl) health \(.health) labels \(.labels | tostring)" end
  ' "${work}/${name}-targets.json" | sort)
  if [[ "${got}" != "${want}" ]]; then
    log "FAIL: ${name} scrapes through /sd: ${got//$'\n'/; }; want: ${want//$'\n'/; }"
    return 1
  fi
  if grep -qF "${urls[svc3]#http://}" "${work}/${name}-targets.json"; then
    log "FAIL: ${name} has the unlisted svc3 (${urls[svc3]}) among its targets: ${work}/${name}-targets.json"
    return 1
  fi
  # And in the data: deployment_service_up of every listed service, 1, with
  # its module; of no other.
  got=$(curl -fsS --get --data-urlencode "query=deployment_service_up{job=\"${job}\"}" "${prom}/api/v1/query" |
    jq -r '.data.result[] | "\(.metric.module) \(.metric.instance) \(.value[1])"' | sort)
  if [[ "${got}" != "$(sed 's/$/ 1/' <<<"${want}")" ]]; then
    log "FAIL: ${name} deployment_service_up{job=\"${job}\"}: ${got//$'\n'/; }; want each of ${want//$'\n'/; } at 1"
    return 1
  fi
  n=$(wc -l <<<"${want}")
  log "ok: ${name} discovered ${n} /probe targets through /sd, as many as the modules list, each up with its module; svc3 not among them"
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
  check_discovery "${name}" "http://127.0.0.1:${port}" "${probe_job}" || status=1

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
  jobs2=$(scrape_job deployment_service "" && sd_job "")
  check_with prometheus2 "${prometheus2}" "${jobs2}" "deployment_service=classic" \
    deployment_service_probe deployment_service ||
    failed+=("Prometheus 2.42")
fi

if [[ " ${versions} " == *" 3.16 "* ]]; then
  native='    scrape_native_histograms: true'
  both=$'    scrape_native_histograms: true\n    always_scrape_classic_histograms: true'
  classic='    scrape_native_histograms: false'
  jobs3=$(scrape_job deployment_service "${both}" &&
    scrape_job deployment_service_native "${native}" &&
    scrape_job deployment_service_classic "${classic}" &&
    sd_job "${native}")
  check_with prometheus3 "${prometheus3}" "${jobs3}" \
    "deployment_service=native+classic deployment_service_native=native deployment_service_classic=classic" \
    deployment_service_probe \
    deployment_service deployment_service_native deployment_service_classic ||
    failed+=("Prometheus 3.16")
fi

[[ ${#failed[@]} -eq 0 ]] || die "dashboard or rule queries, or the discovery through /sd, failed with ${failed[*]} (see FAIL lines above)"
[[ $(svc3_requests) == 0 ]] || die "the unlisted svc3 had $(svc3_requests) request(s) while Prometheus ran"
log "ok: svc3, listed by no module, had no request while Prometheus ran"
log "ok: every dashboard and rule query works on Prometheus ${versions}, for /metrics and /probe targets found through /sd"
