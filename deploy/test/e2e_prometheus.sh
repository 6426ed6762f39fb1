#!/usr/bin/env bash
# End-to-end check of the dashboards and rules against a real Prometheus.
#
# Builds the exporter with scripts/build.sh, runs it with --demo on a free
# loopback port, runs Debian's Prometheus (installed when missing) scraping
# it every second with the rules of deploy/prometheus/rules loaded, then sends
# every PromQL expression of grafana/dashboards, the recording rules and the
# alert rules to Prometheus' query API (tools/cmd/promqlcheck): dashboard and
# recording expressions must parse and return data, alert expressions must
# evaluate. Everything it starts is stopped on exit.
#
# Environment: EXPORTER_BIN=path skips the build and uses that binary.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_apt curl curl
ensure_apt prometheus prometheus

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
    for f in exporter.log prometheus.log; do
      [[ -s "${work}/${f}" ]] && { log "last lines of ${f}:"; tail -n 30 "${work}/${f}" >&2; }
    done
  fi
  rm -rf "${work}"
  exit "${status}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

exporter=$(exporter_binary "${work}")
promqlcheck=$(tools_binary promqlcheck "${work}")

# scripts/build.sh put the version information in through -ldflags.
version=$("${exporter}" --version 2>&1) || die "${exporter} --version failed: ${version}"
grep -qE 'build date: +[0-9]{4}-[0-9]{2}-[0-9]{2}T' <<<"${version}" ||
  die "the binary carries no build date; are the -X ldflags of scripts/build.sh still right? ${version}"
log "ok: $(head -n 1 <<<"${version}")"

exporter_port=$(free_port)
log "starting the exporter in demo mode on 127.0.0.1:${exporter_port}"
"${exporter}" --demo \
  --locations.detail-limit=5 \
  --locations.info-field=name \
  --web.listen-address="127.0.0.1:${exporter_port}" \
  --log.level=debug >"${work}/exporter.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:${exporter_port}/-/healthy" 30 || die "exporter did not answer /-/healthy"
wait_http "http://127.0.0.1:${exporter_port}/-/ready" 30 || die "exporter did not answer /-/ready"
log "ok: /-/healthy and /-/ready answer 200"

prometheus_port=$(free_port)
while [[ "${prometheus_port}" == "${exporter_port}" ]]; do prometheus_port=$(free_port); done
cat >"${work}/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - ${repo}/deploy/prometheus/rules/*.yml
scrape_configs:
  - job_name: deployment_service
    static_configs:
      - targets: ["127.0.0.1:${exporter_port}"]
YAML
promtool check config "${work}/prometheus.yml" >/dev/null

log "starting $(prometheus --version 2>&1 | head -n 1) on 127.0.0.1:${prometheus_port}"
prometheus \
  --config.file="${work}/prometheus.yml" \
  --storage.tsdb.path="${work}/data" \
  --web.listen-address="127.0.0.1:${prometheus_port}" \
  --web.console.templates="${work}" --web.console.libraries="${work}" \
  >"${work}/prometheus.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:${prometheus_port}/-/ready" 60 || die "Prometheus did not become ready"

dashboards=("${repo}"/grafana/dashboards/*.json)
rules=("${repo}"/deploy/prometheus/rules/*.yml)
args=(-prometheus "http://127.0.0.1:${prometheus_port}" -wait-timeout 90s
  -wait 'up{job="deployment_service"} == 1'
  -wait 'count_over_time(deployment_service_up{job="deployment_service"}[1m]) >= 8')
for d in "${dashboards[@]}"; do args+=(-dashboard "${d}"); done
for r in "${rules[@]}"; do args+=(-rules "${r}"); done

"${promqlcheck}" "${args[@]}"
