#!/usr/bin/env bash
# The bash -c checks below expand their arguments themselves.
# shellcheck disable=SC2016

# Static checks of the Dockerfile and .dockerignore (no Docker engine needed).
#
# The image's binary must be built by scripts/build.sh, the script CI builds
# with, so that the tested binary and the shipped one cannot drift apart.
# Also checked: a builder pinned to an exact Go release no older than go.mod's,
# a distroless-static or scratch final stage, a non-root USER, EXPOSE 10044,
# an exec-form ENTRYPOINT running the binary copied from the builder, and a
# .dockerignore that keeps .git out but what the build needs in.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "${repo}"
passed=0
failed=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    log "FAIL: ${what}"
  fi
}

[[ -f Dockerfile ]] || die "no Dockerfile"
# Instructions with continuation lines joined and comments dropped.
instructions=$(sed -e '/^[[:space:]]*#/d' Dockerfile | sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' | sed -e '/^[[:space:]]*$/d')
stages=$(grep -ciE '^FROM ' <<<"${instructions}")
final=$(awk 'toupper($1) == "FROM" { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' <<<"${instructions}")
builder=$(awk 'toupper($1) == "FROM" { n++ } n == 1' <<<"${instructions}")

go_version=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
builder_image=$(awk 'toupper($1) == "FROM" { print $2; exit }' <<<"${instructions}")
builder_version=$(sed -n 's/^golang:\([0-9][0-9.]*\).*/\1/p' <<<"${builder_image}")
final_image=$(awk 'toupper($1) == "FROM" { print $2 }' <<<"${instructions}" | tail -n 1)

version_ge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]; }

check "multi-stage build (have ${stages} stages)" test "${stages}" -ge 2
check "builder is golang:X.Y.Z-..., pinned to a patch release or digest (have ${builder_image})" \
  grep -qE '^golang:[0-9]+\.[0-9]+\.[0-9]+(-[a-z0-9]+)?(@sha256:[0-9a-f]{64})?$' <<<"${builder_image}"
check "builder Go ${builder_version} is at least go.mod's go ${go_version}" version_ge "${builder_version:-0}" "${go_version}"
check "builder runs ./scripts/build.sh" grep -qE '^RUN .*(\./)?scripts/build\.sh' <<<"${builder}"
check "no go build outside scripts/build.sh" bash -c '! grep -qE "go (build|install)" <<<"$1"' _ "${instructions}"
check "final image is distroless static or scratch (have ${final_image})" \
  grep -qE '^(gcr\.io/distroless/static[a-z0-9-]*:[a-z0-9-]*nonroot[a-z0-9-]*(@sha256:[0-9a-f]{64})?|scratch)$' <<<"${final_image}"
user=$(awk 'toupper($1) == "USER" { u = $2 } END { print u }' <<<"${final}")
check "final stage sets a non-root USER (have '${user}')" \
  bash -c '[[ -n "$1" && ! "$1" =~ ^(root|0)(:.*)?$ ]]' _ "${user}"
check "final stage EXPOSEs 10044" grep -qE '^EXPOSE +10044(/tcp)?$' <<<"${final}"
entrypoint=$(awk 'toupper($1) == "ENTRYPOINT"' <<<"${final}" | tail -n 1)
binary=$(sed -n 's/^ENTRYPOINT *\[ *"\([^"]*\)".*/\1/p' <<<"${entrypoint}")
check "ENTRYPOINT is exec form running deployment_service_exporter (have '${entrypoint}')" \
  grep -qE '/deployment_service_exporter$' <<<"${binary}"
check "the ENTRYPOINT binary ${binary} is copied from the builder" \
  grep -qE "^COPY +--from=[a-z0-9_-]+ +[^ ]*/deployment_service_exporter +${binary}$" <<<"${final}"

check ".dockerignore exists" test -f .dockerignore
check ".dockerignore keeps .git out" grep -qxE '/?\.git/?' .dockerignore
for needed in go.mod go.sum main.go scripts scripts/build.sh client collector '*.go'; do
  check ".dockerignore keeps ${needed} in" bash -c '! grep -qxE "/?${1//./\\.}/?" .dockerignore' _ "${needed}"
done
check "scripts/build.sh is executable" test -x scripts/build.sh
if git ls-files --error-unmatch scripts/build.sh >/dev/null 2>&1; then
  check "scripts/build.sh is committed as executable" bash -c '[[ "$(git ls-files -s scripts/build.sh | cut -d" " -f1)" == 100755 ]]'
fi
check "scripts/build.sh sets CGO_ENABLED=0, -trimpath and the version ldflags" \
  bash -c 'grep -q "CGO_ENABLED=0" scripts/build.sh && grep -q -- "-trimpath" scripts/build.sh && grep -q "prometheus/common/version" scripts/build.sh'

echo "${passed} passed, ${failed} failed"
[[ ${failed} -eq 0 ]]
