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

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on.
free_port() {
  local port i
  for ((i = 0; i < 100; i++)); do
    port=$((20000 + RANDOM % 40000))
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
