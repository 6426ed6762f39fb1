#!/usr/bin/env bash
# Checks the settings that keep releases free of known vulnerabilities and
# their inputs pinned (.ci/run runs it):
#
#   - one release toolchain: go.mod's toolchain line (newer than its go line,
#     the minimum the README's commands run with) is what .goreleaser.yaml's
#     GOTOOLCHAIN, the Dockerfile's builder image and every setup-go name;
#   - every action a workflow uses is pinned to a commit, its version in a
#     comment;
#   - Dependabot watches every Go module but tools/sloth (whose version list
#     the module proxy refuses), the actions, the Dockerfile and the Compose
#     file;
#   - SECURITY.md sends reports to GitHub's private advisories and lists the
#     supported versions;
#   - packaging/README.md verifies the signatures with the identity of the
#     release workflow and the signature file .goreleaser.yaml makes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
ok() { echo "ok: $*"; }

echo "--- release toolchain"
toolchain=$(sed -n 's/^toolchain go\([0-9.]*\)$/\1/p' go.mod)
minimum=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
if [[ -z "${toolchain}" ]]; then
  fail "go.mod has no toolchain line: releases would be built with its minimum, go ${minimum}"
  exit 1
elif [[ "$(printf '%s\n' "${minimum}" "${toolchain}" | sort -V | tail -n 1)" != "${toolchain}" || "${minimum}" == "${toolchain}" ]]; then
  fail "go.mod's toolchain go${toolchain} is not newer than its go ${minimum}"
fi
grep -qxF -- "  - GOTOOLCHAIN=go${toolchain}" .goreleaser.yaml ||
  fail ".goreleaser.yaml does not build with GOTOOLCHAIN=go${toolchain} (go.mod's toolchain line)"
builder=$(awk 'toupper($1) == "FROM" { for (i = 2; i <= NF; i++) if ($i !~ /^--/) { print $i; exit } }' Dockerfile)
[[ "${builder}" == golang:"${toolchain}"-* ]] ||
  fail "the Dockerfile's builder is ${builder}, not golang:${toolchain}-... (go.mod's toolchain line)"
setup_go=0
for wf in .github/workflows/*.yml; do
  while IFS= read -r line; do
    setup_go=$((setup_go + 1))
    [[ "${line}" == *"go-version: \"${toolchain}\""* ]] || fail "${wf}: setup-go with ${line:-no go-version}, want go-version: \"${toolchain}\""
  done < <(awk '/uses: actions\/setup-go@/ { getline; getline; sub(/^ +/, ""); print }' "${wf}")
done
((setup_go > 0)) || fail "no workflow sets up Go with setup-go"
ok "go${toolchain} (go.mod's toolchain line; minimum go ${minimum}) in .goreleaser.yaml, the Dockerfile and ${setup_go} setup-go steps"

echo "--- actions pinned to commits"
uses=$(grep -hE '^[[:space:]-]*uses:' .github/workflows/*.yml | sed 's/^[[:space:]-]*uses:[[:space:]]*//')
unpinned=$(grep -vE '^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40} # v[0-9][0-9.]*$' <<<"${uses}" || true)
[[ -z "${unpinned}" ]] || fail "actions not pinned to a commit with '# vX.Y.Z': ${unpinned}"
ok "$(wc -l <<<"${uses}") uses of actions, each pinned to a commit"

echo "--- Dependabot"
dependabot=.github/dependabot.yml
# watched ECOSYSTEM DIR: Dependabot has an entry for ECOSYSTEM naming DIR.
watched() {
  awk -v eco="$1" -v dir="\"$2\"" '
    /package-ecosystem:/ { on = ($3 == eco) }
    on && /director(y|ies):/ { if (index($0, dir)) found = 1 }
    END { exit !found }' "${dependabot}"
}
while IFS= read -r mod; do
  dir=/$(dirname "${mod}")
  dir=${dir%/.}
  [[ "${dir}" == /tools/sloth ]] && continue
  watched gomod "${dir:-/}" || fail "${dependabot} does not watch the Go module ${dir:-/}"
done < <(git ls-files '*go.mod')
watched github-actions / || fail "${dependabot} does not watch the workflows' actions"
watched docker / || fail "${dependabot} does not watch the Dockerfile's images"
while IFS= read -r compose; do
  watched docker-compose "/$(dirname "${compose}")" || fail "${dependabot} does not watch ${compose}'s images"
done < <(git ls-files '*compose.yaml')
ok "${dependabot} watches the Go modules, the actions, the Dockerfile and the Compose files"

echo "--- SECURITY.md"
grep -qF 'https://github.com/deployment-service/deployment_service_exporter/security/advisories/new' SECURITY.md ||
  fail "SECURITY.md does not send reports to the private security advisories"
grep -q '^## Supported versions' SECURITY.md || fail "SECURITY.md has no 'Supported versions' section"
ok "SECURITY.md: private reporting, supported versions"

echo "--- signature verification documented"
identity='https://github.com/deployment-service/deployment_service_exporter/.github/workflows/release.yml@refs/tags/v'
[[ -f .github/workflows/release.yml ]] || fail "no .github/workflows/release.yml, the identity packaging/README.md verifies"
# shellcheck disable=SC2016 # a literal ${artifact}
signature=$(sed -n 's/^    signature: "\${artifact}\(.*\)"$/sha256sums.txt\1/p' .goreleaser.yaml)
for want in "--certificate-identity=${identity}" "--bundle ${signature:-?}" "--certificate-oidc-issuer=https://token.actions.githubusercontent.com" \
  "gh attestation verify"; do
  grep -qF -- "${want}" packaging/README.md || fail "packaging/README.md does not verify with '${want}'"
done
ok "packaging/README.md verifies ${signature} and the images with the release workflow's identity"

((failed == 0)) || exit 1
echo "supply-chain check passed"
