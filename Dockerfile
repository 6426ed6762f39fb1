# syntax=docker/dockerfile:1
#
# deployment_service_exporter: a static binary on a distroless base, run as
# a non-root user. Releases publish it, for linux/amd64 and linux/arm64, as
# ghcr.io/deployment-service/deployment-service-exporter (tags X.Y.Z and
# latest), the image the Helm chart, kustomize base and compose file run.
# To build and push an image of your own:
#
#   docker build -t REGISTRY/deployment-service-exporter:0.1.0 \
#     --build-arg VERSION="$(cat VERSION)" \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg BRANCH="$(git rev-parse --abbrev-ref HEAD)" \
#     --build-arg BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)" .
#   docker push REGISTRY/deployment-service-exporter:0.1.0
#
# Several platforms at once (the builder cross-compiles, no emulation):
#
#   docker buildx build --platform linux/amd64,linux/arm64 --push \
#     -t REGISTRY/deployment-service-exporter:0.1.0 --build-arg VERSION=0.1.0 ... .
#
# The binary is built by scripts/build.sh, the same script CI runs, so the
# build flags (CGO_ENABLED=0, -trimpath, -ldflags with the version) are the
# same here and there. .git is not sent to the builder (.dockerignore): pass
# the version through the build arguments above; without VERSION the binary
# takes the VERSION file's.

# The builder runs on the build machine's platform and cross-compiles for the
# target's: Go needs no emulator for that, so a multi-platform build is fast.
# Its Go is the release toolchain of go.mod's toolchain line (the image does
# not switch toolchains by itself: GOTOOLCHAIN=local).
FROM --platform=$BUILDPLATFORM golang:1.27.4-bookworm AS builder

WORKDIR /src
# Dependencies first, so they stay cached while the code changes.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .

# Set by BuildKit from --platform (or the daemon's own platform).
ARG TARGETOS
ARG TARGETARCH
ARG VERSION
ARG REVISION
ARG BRANCH
ARG BUILD_USER=docker
ARG BUILD_DATE
# v1.0.0 builds the FIPS 140-3 variant (tag X.Y.Z-fips): Go's validated
# cryptographic module, always on.
ARG GOFIPS140=off
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS="${TARGETOS}" GOARCH="${TARGETARCH}" GOFIPS140="${GOFIPS140}" \
    VERSION="${VERSION}" REVISION="${REVISION}" BRANCH="${BRANCH}" \
    BUILD_USER="${BUILD_USER}" BUILD_DATE="${BUILD_DATE}" \
    OUTPUT=/out/deployment_service_exporter \
    ./scripts/build.sh

# Static binary: no libc needed. The image has CA certificates (for an https
# --api.url), /etc/passwd with the nonroot user, and no shell.
FROM gcr.io/distroless/static-debian12:nonroot

# Build arguments are per stage: these feed the OCI labels.
ARG VERSION
ARG REVISION
ARG BUILD_DATE
ARG SOURCE=https://github.com/deployment-service/deployment_service_exporter
LABEL org.opencontainers.image.title="deployment_service_exporter" \
      org.opencontainers.image.description="Prometheus exporter for a deployment service's JSON API" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.source="${SOURCE}"

COPY --from=builder /out/deployment_service_exporter /bin/deployment_service_exporter

# 65532 is distroless' nonroot user.
USER 65532:65532
EXPOSE 10044
ENTRYPOINT ["/bin/deployment_service_exporter"]
