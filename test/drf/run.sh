#!/usr/bin/env bash
# Integration test of the exporter against a real Django REST framework
# service under gunicorn.
#   test/drf/run.sh [go test flags, e.g. -run TestGzip]
#
# Sets up the Django app of test/drf/service with Debian's python3-django,
# python3-djangorestframework and gunicorn (installed when missing), migrates
# a SQLite database in a temporary directory, seeds it, serves it with
# gunicorn on a free 127.0.0.1 port, and runs the Go test of test/drf (build
# tag drf), which starts the exporter binary against each of the service's
# API prefixes. Everything it starts is stopped on exit.
#
# Environment: EXPORTER_BIN=path uses that binary instead of building one.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../deploy/test/lib.sh"

here="${repo}/test/drf"
# Debian's Python, not whatever python3 comes first in PATH (pyenv, a venv):
# the Django and DRF packages live in its dist-packages.
python=/usr/bin/python3
gunicorn=/usr/bin/gunicorn

if ! { [[ -x "${gunicorn}" ]] && "${python}" -c 'import rest_framework.authtoken' 2>/dev/null; }; then
  log "installing python3-djangorestframework and gunicorn"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    python3-djangorestframework gunicorn >/dev/null
fi
versions=$("${python}" -c 'import django, rest_framework; print(f"Django {django.get_version()}, DRF {rest_framework.VERSION}")') ||
  die "Debian's Django REST framework is not importable by ${python}"
ensure_apt curl curl

work=$(mktemp -d)
gunicorn_pid=
cleanup() {
  local status=$?
  if [[ -n "${gunicorn_pid}" ]]; then
    kill "${gunicorn_pid}" 2>/dev/null || true
    wait "${gunicorn_pid}" 2>/dev/null || true
  fi
  if [[ ${status} -ne 0 && -s "${work}/gunicorn.log" ]]; then
    log "last lines of gunicorn.log:"
    tail -n 30 "${work}/gunicorn.log" >&2
  fi
  rm -rf "${work}"
  exit "${status}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

exporter=$(realpath "$(exporter_binary "${work}")")

export DRF_STATE_DIR="${work}"
export DJANGO_SETTINGS_MODULE=deployments.settings
export PYTHONPATH="${here}/service"
# Leave no __pycache__ in the source tree.
export PYTHONDONTWRITEBYTECODE=1

log "${versions}: migrating and seeding a database in ${work}"
"${python}" -m django migrate --run-syncdb --verbosity 0
"${python}" -m django seed "${work}/facts.json"

port=$(free_port)
log "starting gunicorn on 127.0.0.1:${port}"
"${gunicorn}" --config "${here}/service/gunicorn.conf.py" \
  --bind "127.0.0.1:${port}" \
  --access-logfile "${work}/access.log" \
  --error-logfile "${work}/gunicorn.log" &
gunicorn_pid=$!

# Without a key the API root answers 401: the service is up.
for ((i = 0; ; i++)); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:${port}/page/api/" || true)
  [[ "${code}" == 401 ]] && break
  kill -0 "${gunicorn_pid}" 2>/dev/null || die "gunicorn exited"
  ((i < 120)) || die "the service did not answer 401 at /page/api/ (last: ${code})"
  sleep 0.25
done

cd "${repo}"
go vet -tags drf ./test/drf/
DRF_URL="http://127.0.0.1:${port}" \
  DRF_FACTS="${work}/facts.json" \
  DRF_ACCESS_LOG="${work}/access.log" \
  EXPORTER_BIN="${exporter}" \
  go test -tags drf -count=1 -v ./test/drf/ "$@"
