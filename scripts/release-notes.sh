#!/usr/bin/env bash
# Prints the section of CHANGELOG.md for a version, the release notes the
# release workflow hands GoReleaser (without the heading: the release's name
# is the version and date already); fails when there is none, so that no
# release goes out without its changelog.
#   scripts/release-notes.sh 0.1.0
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=${1:?usage: $0 VERSION}
# The section runs from its heading, "## 0.1.0 / 2026-11-22", to the next
# heading of the same level.
notes=$(awk -v v="${version}" '
  /^## / { if (found) exit; found = ($2 == v) }
  found' CHANGELOG.md)
if [[ -z "$(sed '1d' <<<"${notes}" | tr -d '[:space:]')" ]]; then
  echo "CHANGELOG.md has no section \"## ${version} / DATE\" with notes: write it before tagging v${version}" >&2
  exit 1
fi
sed '1d' <<<"${notes}"
