#!/usr/bin/env bash
# The bash -c checks below expand their arguments themselves.
# shellcheck disable=SC2016

# Static checks of the Dockerfile and .dockerignore (no Docker engine needed).
#
# The image's binary must be built by scripts/build.sh, the script CI builds
# with, so that the tested binary and the shipped one cannot drift apart.
# Also checked: the dockerfile:1 syntax line (for RUN --mount); a builder
# pinned to an exact Go release no older than go.mod's, running on
# $BUILDPLATFORM and cross-compiling for TARGETOS/TARGETARCH with CGO off;
# build-cache mounts for the module and build caches; a distroless-static or
# scratch final stage for the target platform with the OCI labels version,
# revision, created and source fed by build arguments of that stage; a
# non-root USER, EXPOSE 10044, an exec-form ENTRYPOINT running the binary
# copied from the builder; a .dockerignore that keeps .git out but what the
# build needs in; and scripts/build.sh passing GOOS, GOARCH and CGO_ENABLED=0
# to go build (run against a stand-in go command).
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

# from_image: the image of a FROM line, past flags such as --platform.
from_image() { awk '{ for (i = 2; i <= NF; i++) if ($i !~ /^--/) { print $i; exit } }'; }
go_version=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
builder_from=$(awk 'toupper($1) == "FROM" { print; exit }' <<<"${instructions}")
final_from=$(awk 'toupper($1) == "FROM"' <<<"${instructions}" | tail -n 1)
builder_image=$(from_image <<<"${builder_from}")
builder_version=$(sed -n 's/^golang:\([0-9][0-9.]*\).*/\1/p' <<<"${builder_image}")
final_image=$(from_image <<<"${final_from}")
build_run=$(grep -E '^RUN .*scripts/build\.sh' <<<"${builder}" || true)

version_ge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]; }

check "multi-stage build (have ${stages} stages)" test "${stages}" -ge 2
check "builder is golang:X.Y.Z-..., pinned to a patch release or digest (have ${builder_image})" \
  grep -qE '^golang:[0-9]+\.[0-9]+\.[0-9]+(-[a-z0-9]+)?(@sha256:[0-9a-f]{64})?$' <<<"${builder_image}"
check "builder Go ${builder_version} is at least go.mod's go ${go_version}" version_ge "${builder_version:-0}" "${go_version}"
check "builder runs ./scripts/build.sh" grep -qE '^RUN .*(\./)?scripts/build\.sh' <<<"${builder}"
check "no go build outside scripts/build.sh" bash -c '! grep -qE "go (build|install)" <<<"$1"' _ "${instructions}"
check "first line is '# syntax=docker/dockerfile:1' (RUN --mount needs it on older builders)" \
  grep -qE '^# *syntax=docker/dockerfile:1(\.[0-9]+)*$' <<<"$(head -n 1 Dockerfile)"
check "builder runs on the build machine: FROM --platform=\$BUILDPLATFORM (have '${builder_from}')" \
  grep -qE -- '--platform=\$\{?BUILDPLATFORM\}?( |$)' <<<"${builder_from}"
check "final stage is for the target platform, not --platform=\$BUILDPLATFORM (have '${final_from}')" \
  bash -c '! grep -q -- "--platform=" <<<"$1"' _ "${final_from}"
for arg in TARGETOS TARGETARCH; do
  check "builder declares ARG ${arg}" grep -qE "^ARG( +[A-Za-z_0-9]+(=[^ ]*)?)* +${arg}( |=|$)" <<<"${builder}"
done
for pair in 'GOOS=TARGETOS' 'GOARCH=TARGETARCH'; do
  check "the build sets ${pair%%=*}=\$${pair#*=} (have '${build_run}')" \
    grep -qE "(^| )${pair%%=*}=\"?\\\$\{?${pair#*=}\}?\"?( |$)" <<<"${build_run}"
done
check "the build sets CGO_ENABLED=0" grep -qE '(^| )CGO_ENABLED=0( |$)' <<<"${build_run}"
for cache in /root/.cache/go-build /go/pkg/mod; do
  check "the build mounts a cache at ${cache}" grep -qE -- "--mount=type=cache,(.*,)?target=${cache}( |,|$)" <<<"${build_run}"
done
check "go mod download mounts the module cache" \
  bash -c '! grep -E "^RUN .*go mod download" <<<"$1" | grep -vqE -- "--mount=type=cache,(.*,)?target=/go/pkg/mod( |,|$)"' _ "${builder}"
final_args=$(awk 'toupper($1) == "ARG" { for (i = 2; i <= NF; i++) { sub(/=.*/, "", $i); print $i } }' <<<"${final}")
for label in version revision created source; do
  value=$(grep -oE "org\.opencontainers\.image\.${label}=(\"[^\"]*\"|[^ ]+)" <<<"${final}" | head -n 1 | cut -d= -f2- | tr -d '"' || true)
  var=$(sed -n 's/.*\${\{0,1\}\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' <<<"${value}")
  check "final stage LABELs org.opencontainers.image.${label} from a build argument (have '${value}')" test -n "${var}"
  if [[ -n "${var}" ]]; then
    check "the final stage declares ARG ${var} for org.opencontainers.image.${label} (build arguments are per stage)" \
      grep -qx -- "${var}" <<<"${final_args}"
  fi
done
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

# scripts/build.sh must hand the target platform to go build: run it with a
# stand-in go command that records what it is given.
shim=$(mktemp -d)
trap 'rm -rf "${shim}"' EXIT
printf '%s\n' '#!/usr/bin/env bash' \
  'printf "GOOS=%s GOARCH=%s CGO_ENABLED=%s args=%s\n" "${GOOS:-}" "${GOARCH:-}" "${CGO_ENABLED:-}" "$*" >"${SHIM_LOG}"' >"${shim}/go"
chmod +x "${shim}/go"
seen="scripts/build.sh failed"
if PATH="${shim}:${PATH}" SHIM_LOG="${shim}/log" GOOS=linux GOARCH=arm64 VERSION=1.2.3 OUTPUT="${shim}/out" \
  scripts/build.sh 2>/dev/null; then
  seen=$(cat "${shim}/log" 2>/dev/null || echo "no go build")
fi
check "scripts/build.sh runs go build with GOOS=linux GOARCH=arm64 CGO_ENABLED=0 as given (saw: ${seen})" \
  grep -qE "^GOOS=linux GOARCH=arm64 CGO_ENABLED=0 args=build .*-o ${shim}/out" <<<"${seen}"

echo "${passed} passed, ${failed} failed"
[[ ${failed} -eq 0 ]]
