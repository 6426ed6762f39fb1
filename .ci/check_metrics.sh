#!/usr/bin/env bash
# Starts the exporter in --demo mode on a free loopback port, scrapes it a
# few times and lints every scrape with promtool check metrics; then asks
# /metrics and /probe for OpenMetrics and parses both with a strict
# OpenMetrics parser nobody here wrote (Debian's python3-prometheus-client).
set -euo pipefail
bin=${1:?usage: check_metrics.sh path/to/deployment_service_exporter}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 19144)
log=$(mktemp)
modules=$(mktemp)
printf 'modules:\n  default: {}\n' >"$modules"
"$bin" --demo --web.listen-address="127.0.0.1:$port" --locations.detail-limit=5 --locations.info-field=name \
  --config.file="$modules" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log" "$modules"' EXIT
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break
  sleep 0.1
done
for i in 1 2 3; do
  scrape=$(curl -fsS "http://127.0.0.1:$port/metrics")
  grep -q '^deployment_service_up 1$' <<<"$scrape" || { echo "scrape $i: deployment_service_up is not 1"; cat "$log"; exit 1; }
  problems=$(promtool check metrics <<<"$scrape" 2>&1) || { echo "$problems"; exit 1; }
  if [ -n "$problems" ]; then echo "$problems"; exit 1; fi
done
echo "promtool check metrics: 3 demo scrapes clean"

# Debian's Python, which the package installs into, whatever python3 is
# first on PATH.
if ! /usr/bin/python3 -c 'import prometheus_client.openmetrics.parser' 2>/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-prometheus-client >/dev/null
fi
demo=$(sed -n 's/.*Demo mode: watching the embedded sample service" url=\([^ ]*\).*/\1/p' "$log")
for path in /metrics "/probe?target=${demo}"; do
  curl -fsS -H 'Accept: application/openmetrics-text; version=1.0.0' "http://127.0.0.1:$port$path" |
    /usr/bin/python3 -c '
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
families = list(text_string_to_metric_families(sys.stdin.read()))
created = sum(1 for f in families for s in f.samples if s.name.endswith("_created"))
if created:
    sys.exit(f"{created} _created samples")
print(f"{len(families)} families, no _created sample")
' || { echo "OpenMetrics of $path does not parse strictly"; exit 1; }
done
echo "OpenMetrics: /metrics and /probe parse with a strict parser"
