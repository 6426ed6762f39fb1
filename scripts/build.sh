#!/usr/bin/env bash
# Builds the deployment_service_exporter binary.
#
# This script is the single source of the build flags: the Dockerfile's
# builder stage and CI both run it, so the binary CI tests is built exactly
# like the one in the image.
#
# Environment (all optional):
#   OUTPUT      path of the binary       (default: dist/deployment_service_exporter in the repository)
#   VERSION     version string           (default: VERSION file, else git describe, else 0.0.0-dev)
#   REVISION    commit hash              (default: git rev-parse HEAD, else unknown)
#   BRANCH      branch name              (default: git rev-parse --abbrev-ref HEAD, else unknown)
#   BUILD_USER  who built it             (default: $USER@$HOSTNAME)
#   BUILD_DATE  build time, RFC 3339 UTC (default: now, or SOURCE_DATE_EPOCH when set)
#   GOOS, GOARCH are honoured as usual by go build.
set -euo pipefail

# OUTPUT, when relative, is taken from the caller's directory.
if [[ -n "${OUTPUT:-}" && "${OUTPUT}" != /* ]]; then
  OUTPUT="${PWD}/${OUTPUT}"
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly pkg=github.com/prometheus/common/version

git_or() {
  local fallback=$1
  shift
  if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
    git "$@" 2>/dev/null || echo "${fallback}"
  else
    echo "${fallback}"
  fi
}

if [[ -z "${VERSION:-}" ]]; then
  if [[ -s VERSION ]]; then
    VERSION=$(tr -d '[:space:]' <VERSION)
  else
    VERSION=$(git_or 0.0.0-dev describe --tags --always --dirty)
    VERSION=${VERSION#v}
  fi
fi
REVISION=${REVISION:-$(git_or unknown rev-parse HEAD)}
BRANCH=${BRANCH:-$(git_or unknown rev-parse --abbrev-ref HEAD)}
BUILD_USER=${BUILD_USER:-${USER:-$(id -un 2>/dev/null || echo unknown)}@${HOSTNAME:-$(hostname 2>/dev/null || echo unknown)}}
if [[ -z "${BUILD_DATE:-}" ]]; then
  if [[ -n "${SOURCE_DATE_EPOCH:-}" ]]; then
    BUILD_DATE=$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)
  else
    BUILD_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  fi
fi
OUTPUT=${OUTPUT:-dist/deployment_service_exporter}

# Each value is single-quoted for go build's flag splitting; quotes inside a
# value would break that, so they are dropped.
x() { printf " -X '%s.%s=%s'" "${pkg}" "$1" "${2//\'/}"; }
ldflags="-s -w$(x Version "${VERSION}")$(x Revision "${REVISION}")$(x Branch "${BRANCH}")$(x BuildUser "${BUILD_USER}")$(x BuildDate "${BUILD_DATE}")"

mkdir -p "$(dirname "${OUTPUT}")"
echo "Building ${OUTPUT} (version ${VERSION}, revision ${REVISION})" >&2
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "${ldflags}" -o "${OUTPUT}" .
