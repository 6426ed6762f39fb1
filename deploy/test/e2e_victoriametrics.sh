#!/usr/bin/env bash
# End-to-end check of the dashboards and rules on VictoriaMetrics: the
# single-node victoria-metrics scraping the exporter and vmalert evaluating
# the rule files, both v1.151.0.
#
# Starts the exporter and three sample services as lib_e2e.sh's e2e_start
# says (the /probe, 403 and /sd checks included). victoria-metrics then
# scrapes, every second, the exporter's /metrics as job deployment_service
# and /probe through the job deployment_service_probe of
# deploy/victoriametrics/scrape.yml as shipped (http_sd_configs on /sd, its
# relabelling; only the addresses and intervals changed; /sd asked every
# second through -promscrape.httpSDCheckInterval). VictoriaMetrics stores no
# native histograms: it keeps the classic buckets. vmalert loads every rule
# file of deploy/prometheus/rules, evaluates them every second against
# victoria-metrics and writes the recording rules' results back to it by
# remote write; victoria-metrics answers /api/v1/rules from vmalert
# (-vmalert.proxyURL).
#
# Then tools/cmd/promqlcheck, as in e2e_prometheus.sh, sends every PromQL
# expression of grafana/dashboards and the rule files to victoria-metrics'
# query API (dashboard and recording expressions must return data, alert
# expressions evaluate), for each target too, requires every rule of the
# files loaded in vmalert and healthy, and every recording rule's series
# written back (-recorded). victoria-metrics' /api/v1/targets must show
# exactly the services the modules list, each scraped through /probe with
# its module and up, svc3 nowhere and without a request. Everything it
# starts is stopped on exit.
#
# About 85 seconds, mostly waiting for the recording rules' series:
# VictoriaMetrics makes a new series searchable within about 10 seconds, and
# the SLO's rules read each other five deep.
#
# victoria-metrics and vmalert are taken from $(go env GOPATH)/bin when they
# are v1.151.0, else built there first (a few minutes on 2 cores).
# Environment: EXPORTER_BIN=path uses that exporter binary.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_apt curl curl
ensure_apt jq jq

start_work
# shellcheck source=deploy/test/lib_e2e.sh source-path=SCRIPTDIR
source "${repo}/deploy/test/lib_e2e.sh"

vm=$(victoriametrics_binary victoria-metrics)
vmalert=$(victoriametrics_binary vmalert)
e2e_start

vm_port=$(free_port)
vmalert_port=$(free_port)
while [[ "${vm_port}" == "${exporter_port}" || "${vmalert_port}" == "${exporter_port}" || "${vm_port}" == "${vmalert_port}" ]]; do
  vmalert_port=$(free_port)
done
vm_url="http://127.0.0.1:${vm_port}"

# The file as shipped must load: VictoriaMetrics refuses unknown fields.
"${vm}" -promscrape.config="${repo}/deploy/victoriametrics/scrape.yml" -promscrape.config.dryRun \
  >"${work}/dryrun.log" 2>&1 || die "victoria-metrics refuses deploy/victoriametrics/scrape.yml: $(tail -n 5 "${work}/dryrun.log")"
log "ok: victoria-metrics accepts deploy/victoriametrics/scrape.yml as shipped"

cat >"${work}/scrape.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
$(scrape_job deployment_service "")
$(sd_job "${repo}/deploy/victoriametrics/scrape.yml" "")
YAML

log "starting victoria-metrics and vmalert ${victoriametrics_version} on 127.0.0.1:${vm_port} and :${vmalert_port}"
# -search.latencyOffset=0s: answer with the samples of the last second,
# which the checks wait for (the default hides the last 30 seconds).
"${vm}" -httpListenAddr="127.0.0.1:${vm_port}" -storageDataPath="${work}/vmdata" \
  -promscrape.config="${work}/scrape.yml" -promscrape.httpSDCheckInterval=1s \
  -search.latencyOffset=0s -vmalert.proxyURL="http://127.0.0.1:${vmalert_port}" \
  >"${work}/victoria-metrics.log" 2>&1 &
pids+=($!)
wait_http "${vm_url}/health" 60 || die "victoria-metrics did not become healthy"

# -rule.evalDelay=0s: evaluate at the current time, as Prometheus does.
"${vmalert}" -httpListenAddr="127.0.0.1:${vmalert_port}" \
  -rule="${repo}/deploy/prometheus/rules/*.yml" -evaluationInterval=1s -rule.evalDelay=0s \
  -datasource.url="${vm_url}" -remoteWrite.url="${vm_url}" -remoteWrite.flushInterval=1s \
  -notifier.blackhole >"${work}/vmalert.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:${vmalert_port}/health" 60 || die "vmalert did not become healthy"

promqlcheck_args "${vm_url}" $((1 + ${#probe_urls[@]}))
args+=(-recorded -target "job=deployment_service,instance=${exporter_addr}" -vars "exporter_job=deployment_service")
for url in "${probe_urls[@]}"; do args+=(-probe-target "job=deployment_service_probe,instance=${url}"); done
status=0
"${promqlcheck}" "${args[@]}" || status=1
check_discovery victoriametrics "${vm_url}" deployment_service_probe || status=1

# The checks above read the latency through the classic buckets: there is
# no native histogram to fall back on.
h=deployment_service_request_duration_seconds
if [[ $(instant_count "${vm_url}" "${h}_bucket") == 0 ]]; then
  log "FAIL: victoria-metrics stored no classic buckets of ${h}"
  status=1
fi

[[ ${status} -eq 0 ]] || die "dashboard or rule queries, or the discovery through /sd, failed on VictoriaMetrics (see FAIL lines above)"
[[ $(svc3_requests) == 0 ]] || die "the unlisted svc3 had $(svc3_requests) request(s) while VictoriaMetrics ran"
log "ok: every dashboard and rule query works on VictoriaMetrics with vmalert, for /metrics and /probe targets found through /sd"
