#!/usr/bin/env bash
# Starts the exporter in --demo mode on a free loopback port, scrapes it a
# few times and lints every scrape with promtool check metrics.
set -euo pipefail
bin=${1:?usage: check_metrics.sh path/to/deployment_service_exporter}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 19144)
log=$(mktemp)
"$bin" --demo --web.listen-address="127.0.0.1:$port" --locations.detail-limit=5 --locations.info-field=name >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
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
