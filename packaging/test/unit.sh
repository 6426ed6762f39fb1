#!/usr/bin/env bash
# Checks the systemd unit:
#
#   packaging/test/unit.sh [UNIT]   (default: the unit in packaging/systemd)
#
# `systemd-analyze security --offline=true` must rate it OK or better
# (exposure below 5.0 of 10). `systemd-analyze verify` runs when the unit's
# ExecStart binary is installed (it reports a missing one), and must print
# nothing: it exits 0 even on unknown or misspelt settings.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
unit=$(realpath "${1:-${here}/../systemd/deployment-service-exporter.service}")

command -v systemd-analyze >/dev/null || { echo "FAIL: systemd-analyze is missing (Debian: apt-get install systemd)" >&2; exit 1; }

out=$(systemd-analyze security --offline=true --threshold=49 --no-pager "${unit}" 2>&1) || {
  echo "${out}"
  echo "FAIL: systemd-analyze security rates ${unit} worse than OK" >&2
  exit 1
}
rating=$(grep -o 'Overall exposure level for .*' <<<"${out}")
grep -qE ': [0-9.]+ (OK|SAFE|PERFECT)' <<<"${rating}" || { echo "${out}"; echo "FAIL: ${rating}" >&2; exit 1; }
echo "ok: systemd-analyze security --offline=true: ${rating}"

exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "${unit}")
if [[ -x "${exec_start}" ]]; then
  out=$(systemd-analyze verify "${unit}" 2>&1) || true
  if [[ -n "${out}" ]]; then
    echo "${out}"
    echo "FAIL: systemd-analyze verify ${unit} has complaints" >&2
    exit 1
  fi
  echo "ok: systemd-analyze verify ${unit}: no complaints"
else
  echo "skip: systemd-analyze verify needs ${exec_start} installed (packaging/test/deb_install.sh runs it)"
fi
