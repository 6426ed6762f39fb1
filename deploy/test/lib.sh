# Helpers shared by the deploy/test scripts. Source it; do not run it.
# shellcheck shell=bash

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
readonly repo

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# ensure_apt CMD PACKAGE: installs PACKAGE from Debian when CMD is missing.
apt_updated=
ensure_apt() {
  local cmd=$1 pkg=$2
  command -v "$cmd" >/dev/null 2>&1 && return 0
  log "installing ${pkg} (for ${cmd})"
  if [[ -z "${apt_updated}" ]]; then
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  # Debian's service packages may try to start their daemon; the tests never
  # use it and run their own process on a port of their own.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkg}" >/dev/null
  command -v "$cmd" >/dev/null 2>&1 || die "${pkg} installed no ${cmd}"
}

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on, below
# the kernel's range of ephemeral ports: a port in that range may be the
# local end of some connection, which nothing answers on but which makes a
# listener's bind fail ("address already in use").
free_port() {
  local port i low=32768
  read -r low _ 2>/dev/null </proc/sys/net/ipv4/ip_local_port_range || true
  ((low > 11000)) || low=32768
  for ((i = 0; i < 100; i++)); do
    port=$((10000 + RANDOM % (low - 10000)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then
      echo "${port}"
      return 0
    fi
  done
  die "no free port found"
}

# wait_http URL SECONDS: waits until URL answers 2xx.
wait_http() {
  local url=$1 secs=$2 i
  for ((i = 0; i < secs * 4; i++)); do
    curl -fsS -o /dev/null --max-time 2 "${url}" 2>/dev/null && return 0
    sleep 0.25
  done
  return 1
}

# exporter_binary DIR: prints the path of an exporter binary. EXPORTER_BIN
# names a prebuilt one; otherwise it is built into DIR by scripts/build.sh,
# with the same flags as the Docker image.
exporter_binary() {
  local dir=$1
  if [[ -n "${EXPORTER_BIN:-}" ]]; then
    [[ -x "${EXPORTER_BIN}" ]] || die "EXPORTER_BIN=${EXPORTER_BIN} is not an executable"
    echo "${EXPORTER_BIN}"
    return 0
  fi
  OUTPUT="${dir}/deployment_service_exporter" "${repo}/scripts/build.sh" >&2
  echo "${dir}/deployment_service_exporter"
}

# tools_binary NAME DIR: builds tools/cmd/NAME into DIR and prints its path.
tools_binary() {
  local name=$1 dir=$2
  (cd "${repo}/tools" && go build -o "${dir}/${name}" "./cmd/${name}") >&2
  echo "${dir}/${name}"
}

prometheus3_module=github.com/prometheus/prometheus
prometheus3_version=v0.316.0 # Prometheus 3.16.0

# prometheus3_binary DIR: prints the path of a Prometheus 3.16 binary,
# building it when there is none. The remove_all_sd tag leaves out the
# optional service discoveries (plugins/plugin_*.go), whose dependencies the
# module proxy does not all serve; static_configs and the file and HTTP
# discoveries stay in (plugins/minimum.go), and http_sd_configs is what
# the end-to-end checks need. The web UI has no assets in such a build;
# the HTTP API works.
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

victoriametrics_module=github.com/VictoriaMetrics/VictoriaMetrics
victoriametrics_version=v1.151.0

# victoriametrics_binary NAME: prints the path of VictoriaMetrics' NAME
# (victoria-metrics or vmalert) at ${victoriametrics_version} in
# $(go env GOPATH)/bin, building it there when it is not (a few minutes on
# 2 cores; .ci/run builds both in the background).
victoriametrics_binary() {
  local name=$1 gobin bin
  gobin=$(go env GOBIN)
  [[ -n "${gobin}" ]] || gobin="$(go env GOPATH)/bin"
  bin="${gobin}/${name}"
  if ! go version -m "${bin}" 2>/dev/null |
    grep -qE "^[[:space:]]+mod[[:space:]]+${victoriametrics_module}[[:space:]]+${victoriametrics_version}([[:space:]]|$)"; then
    log "building ${name} ${victoriametrics_version} into ${gobin} (minutes on 2 cores; later runs reuse it)"
    (cd / && GOFLAGS=-mod=mod go install "${victoriametrics_module}/app/${name}@${victoriametrics_version}") >&2
  fi
  echo "${bin}"
}

# start_fakeapi NAME ARGS...: starts ${work}/fakeapi (bench/cmd/fakeapi) with
# ARGS and waits for its line in ${work}/NAME.json. It runs until this script
# exits and closes its stdin (fifo_fds), or is stopped (fakeapi_pid[NAME]).
declare -A fakeapi_pid
fifo_fds=()
# shellcheck disable=SC2034 # fakeapi_pid is read by the scripts that stop one
start_fakeapi() {
  local name=$1 fd i
  shift
  mkfifo "${work}/${name}.stdin"
  "${work}/fakeapi" "$@" <"${work}/${name}.stdin" >"${work}/${name}.json" 2>"${work}/${name}.log" &
  fakeapi_pid[${name}]=$!
  pids+=($!)
  exec {fd}>"${work}/${name}.stdin"
  fifo_fds+=("${fd}")
  for ((i = 0; i < 100; i++)); do
    [[ -s "${work}/${name}.json" ]] && break
    sleep 0.1
  done
}

# start_work: makes ${work}, a temporary directory, and ${pids}, the
# processes a check starts there. On exit they are stopped, the last lines
# of every log in ${work} are shown when the check failed, and ${work} is
# removed.
start_work() {
  work=$(mktemp -d)
  pids=()
  trap stop_work EXIT
  trap 'exit 130' INT TERM
}

stop_work() {
  local status=$? pid f
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
