# syntax=docker/dockerfile:1
#
# deployment_service_exporter: a static binary on a distroless base, run as
# a non-root user.
#
#   docker build -t deployment_service_exporter \
#     --build-arg VERSION="$(git describe --tags --always)" \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg BRANCH="$(git rev-parse --abbrev-ref HEAD)" .
#
# The binary is built by scripts/build.sh, the same script CI runs, so the
# build flags (CGO_ENABLED=0, -trimpath, -ldflags with the version) are the
# same here and there. .git is not sent to the builder (.dockerignore): pass
# the version through the build arguments above, or a VERSION file.

FROM golang:1.26.8-bookworm AS builder

WORKDIR /src
# Dependencies first, so they stay cached while the code changes.
COPY go.mod go.sum ./
RUN go mod download

COPY . .

ARG VERSION
ARG REVISION
ARG BRANCH
ARG BUILD_USER=docker
ARG BUILD_DATE
ARG TARGETOS
ARG TARGETARCH
RUN GOOS="${TARGETOS:-linux}" GOARCH="${TARGETARCH:-}" \
    VERSION="${VERSION}" REVISION="${REVISION}" BRANCH="${BRANCH}" \
    BUILD_USER="${BUILD_USER}" BUILD_DATE="${BUILD_DATE}" \
    OUTPUT=/out/deployment_service_exporter \
    ./scripts/build.sh

# Static binary: no libc needed. The image has CA certificates (for an https
# --api.url), /etc/passwd with the nonroot user, and no shell.
FROM gcr.io/distroless/static-debian12:nonroot

LABEL org.opencontainers.image.title="deployment_service_exporter" \
      org.opencontainers.image.description="Prometheus exporter for a deployment service's JSON API"

COPY --from=builder /out/deployment_service_exporter /bin/deployment_service_exporter

# 65532 is distroless' nonroot user.
USER 65532:65532
EXPOSE 10044
ENTRYPOINT ["/bin/deployment_service_exporter"]
