#!/usr/bin/env bash
# Checks deploy/compose offline (no Docker engine): the compose file loads
# with the compose-spec reference loader, every mounted file exists, each
# service finds its configuration inside its container, images are pinned
# (the exporter's: the published image at the VERSION file's version),
# ports stay on loopback, and the exporter service's command line uses only
# flags that the exporter binary accepts (from its --help).
#
# Environment: EXPORTER_BIN=path skips the build and uses that binary.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

exporter=$(exporter_binary "${work}")
"${exporter}" --help >"${work}/help.txt" 2>&1 || die "${exporter} --help failed: $(cat "${work}/help.txt")"
# The port in the Dockerfile, compose.yaml and the Kubernetes manifests is
# the binary's default listen address.
grep -qE -- '--web.listen-address="?:10044' "${work}/help.txt" ||
  die "the binary's default --web.listen-address is not :10044 (Dockerfile EXPOSE, compose and Kubernetes use it)"

# The exporter is the published image, at the version of this checkout.
want_image="ghcr.io/deployment-service/deployment-service-exporter:$(tr -d '[:space:]' <"${repo}/VERSION")"
grep -qxF "    image: ${want_image}" "${repo}/deploy/compose/compose.yaml" ||
  die "compose.yaml: the exporter service must name the published image ${want_image}"

composecheck=$(tools_binary composecheck "${work}")
"${composecheck}" -help "${work}/help.txt" "${repo}/deploy/compose/compose.yaml"
