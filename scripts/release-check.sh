#!/usr/bin/env bash
# Checks the release without publishing anything (make release-check; .ci/run
# runs it): `goreleaser check`, then a snapshot release of .goreleaser.yaml
# for linux/amd64 only, and what it produced:
#
#   - exactly one archive, SBOM, .deb, .rpm and sha256sums.txt, which lists
#     the other four with their right sums;
#   - the archive: one directory with the binary (0755), LICENSE, NOTICE,
#     README.md, CHANGELOG.md and THIRD_PARTY_LICENSES;
#   - the binary: the version from the tag (GORELEASER_CURRENT_TAG, here
#     v$(cat VERSION)), the commit, the branch and the commit's date; and
#     byte for byte the binary scripts/build.sh makes from the same version,
#     user and date, so both use the same build flags;
#   - the SBOM: SPDX, naming every module linked into the binary at its
#     version, each with a license;
#   - the .rpm: name, license, files with their modes, owners and the
#     %config(noreplace) environment file, and the install scripts;
#   - the .deb: contents listed by dpkg-deb -c; with INSTALL_CHECK=1 (CI, as
#     root) it is installed, checked and removed by packaging/test/deb_install.sh.
#
# Needs goreleaser and syft at the versions .ci/run pins, on PATH or in
# $(go env GOPATH)/bin (make release-tools builds them), and rpm (Debian
# package rpm) for the .rpm checks.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

gobin=$(go env GOPATH)/bin
export PATH="${PATH}:${gobin}"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
for tool in goreleaser syft rpm dpkg-deb; do
  command -v "${tool}" >/dev/null || fail "${tool} is not installed (make release-tools; Debian: apt-get install rpm)"
done
# The versions .ci/run pins are the ones used here and by the release workflow.
pinned() { sed -n "s/^build_tool $1 \([^ ]*\).*/\1/p" .ci/run; }
for tool in goreleaser syft; do
  want=$(pinned "${tool}")
  have=$(go version -m "$(command -v "${tool}")" | awk '$1 == "mod" { print $3 }')
  [[ -n "${want}" && "${have}" == "${want#*@}" ]] || fail "${tool} ${have:-of unknown version} is installed, .ci/run pins ${want:-nothing}: make release-tools"
  grep -qF -- "${want#*@}" .github/workflows/release.yml || fail ".github/workflows/release.yml does not pin ${tool} ${want#*@} as .ci/run does"
done
ok "goreleaser $(pinned goreleaser | sed 's/.*@//') and syft $(pinned syft | sed 's/.*@//'), as .ci/run and the release workflow pin them"

echo "--- goreleaser check"
goreleaser check

echo "--- snapshot release for linux/amd64"
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
# The release configuration with its target lists narrowed to linux and
# amd64, and its output in a directory of its own (dist/ holds CI's build of
# scripts/build.sh): nothing else changed (checked: 2 lines differ, 1 added).
repo=${PWD}
out=${work}/dist
sed -e 's/^    goos: \[linux, darwin, windows\]$/    goos: [linux]/' \
  -e 's/^    goarch: \[amd64, arm64, arm\]$/    goarch: [amd64]/' .goreleaser.yaml >"${work}/goreleaser.yaml"
printf '\ndist: %s\n' "${out}" >>"${work}/goreleaser.yaml"
changed=$(diff .goreleaser.yaml "${work}/goreleaser.yaml" | grep -c '^>' || true)
[[ "${changed}" == 4 ]] || fail "narrowing the targets changed ${changed} lines of .goreleaser.yaml, not 4 (2 targets, dist and a blank line): update the sed above"

version=$(tr -d '[:space:]' <VERSION)
export GORELEASER_CURRENT_TAG="v${version}"
# A clone without a remote (a local copy) makes GoReleaser drop every git
# fact of a snapshot; give it the project's URL without touching the clone.
if ! git ls-remote --get-url >/dev/null 2>&1; then
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url
  export GIT_CONFIG_VALUE_0=https://github.com/deployment-service/deployment_service_exporter.git
fi
# Where the SBOM's licenses are read (.goreleaser.yaml's sboms env).
GOMODCACHE=$(go env GOMODCACHE)
export GOMODCACHE
goreleaser release --config "${work}/goreleaser.yaml" --snapshot --clean --skip=publish,docker,sign \
  >"${work}/goreleaser.log" 2>&1 || { cat "${work}/goreleaser.log"; fail "goreleaser release --snapshot"; }
# The reference build right away, so that it sees the same working tree.
snapshot=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "${out}/metadata.json")
commit=$(git rev-parse HEAD)
short=$(git rev-parse --short=7 HEAD)
branch=$(git rev-parse --abbrev-ref HEAD)
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
VERSION="${snapshot}" BUILD_USER=goreleaser BUILD_DATE="${date}" OUTPUT="${work}/build.sh-binary" \
  ./scripts/build.sh 2>/dev/null

[[ "${snapshot}" == "${version}-SNAPSHOT-${short}" ]] || fail "snapshot version ${snapshot}, want ${version}-SNAPSHOT-${short}"
ok "snapshot version ${snapshot} (tag v${version} from VERSION)"

cd "${out}"
archive=deployment_service_exporter-${snapshot}.linux-amd64.tar.gz
sbom=${archive}.sbom.json
deb=deployment-service-exporter_${snapshot/-SNAPSHOT/~SNAPSHOT}_amd64.deb
rpm=$(ls deployment-service-exporter-*.x86_64.rpm 2>/dev/null || true)
for f in "${archive}" "${sbom}" "${deb}" "${rpm}" sha256sums.txt; do
  [[ -n "${f}" && -f "${f}" ]] || fail "${f:-*.rpm} is missing; GoReleaser made: $(ls)"
done
produced=$(find . -maxdepth 1 -type f \( -name '*.tar.gz' -o -name '*.zip' -o -name '*.deb' -o -name '*.rpm' -o -name '*.sbom.json' \) | wc -l)
[[ "${produced}" == 4 ]] || fail "want one archive, SBOM, .deb and .rpm; GoReleaser made: $(ls)"
ok "made ${archive}, ${sbom}, ${deb}, ${rpm}, sha256sums.txt"

echo "--- sha256sums.txt"
sha256sum --strict -c sha256sums.txt
[[ "$(awk '{print $2}' sha256sums.txt | sort)" == "$(printf '%s\n' "${archive}" "${sbom}" "${deb}" "${rpm}" | sort)" ]] ||
  fail "sha256sums.txt does not list exactly the archive, SBOM, .deb and .rpm"
ok "sha256sums.txt covers the four artifacts"

echo "--- archive"
dir=deployment_service_exporter-${snapshot}.linux-amd64
want=$(printf '%s\n' "-rw-r--r-- ${dir}/CHANGELOG.md" "-rw-r--r-- ${dir}/LICENSE" "-rw-r--r-- ${dir}/NOTICE" \
  "-rw-r--r-- ${dir}/README.md" "-rw-r--r-- ${dir}/THIRD_PARTY_LICENSES" "-rwxr-xr-x ${dir}/deployment_service_exporter")
have=$(tar -tvzf "${archive}" | awk '{print $1, $6}' | sort -k2)
[[ "${have}" == "${want}" ]] || fail "archive holds:
${have}
want:
${want}"
ok "archive holds ${dir}/ with the binary, LICENSE, NOTICE, README.md, CHANGELOG.md, THIRD_PARTY_LICENSES"
tar -xzf "${archive}" -C "${work}"
for f in LICENSE NOTICE; do
  cmp -s "${work}/${dir}/${f}" "${repo}/${f}" || fail "${f} in the archive differs from the repository's"
done
grep -q '^github.com/prometheus/client_golang ' "${work}/${dir}/THIRD_PARTY_LICENSES" || fail "THIRD_PARTY_LICENSES lacks the modules"

echo "--- binary"
bin=${work}/${dir}/deployment_service_exporter
"${bin}" --version | tee "${work}/version"
grep -qF "version ${snapshot} (branch: ${branch}, revision: ${commit})" "${work}/version" || fail "--version: want version ${snapshot}, branch ${branch}, revision ${commit}"
grep -qE "build date: +${date}$" "${work}/version" || fail "--version: want build date ${date} (the commit's)"
ok "--version: the tag's version, the branch, the commit and its date"
cmp -s "${bin}" "${work}/build.sh-binary" ||
  fail "GoReleaser's binary differs from scripts/build.sh's with the same version, user and date: the build flags drifted apart (compare .goreleaser.yaml's builds with scripts/build.sh)"
ok "byte for byte the binary of scripts/build.sh (VERSION=${snapshot} BUILD_USER=goreleaser BUILD_DATE=${date}): the same flags"

echo "--- SBOM"
go version -m "${bin}" | awk '$1 == "dep" { print $2, $3 }' | sort >"${work}/linked"
python3 - "${sbom}" "${work}/linked" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc.get("spdxVersion", "").startswith("SPDX-2"), "not an SPDX document"
pkgs = {(p["name"], p.get("versionInfo")): p for p in doc["packages"]}
missing, unlicensed = [], []
for line in open(sys.argv[2]):
    name, version = line.split()
    p = pkgs.get((name, version))
    if p is None:
        missing.append(f"{name} {version}")
    elif p.get("licenseConcluded", "NOASSERTION") in ("NOASSERTION", "NONE") and p.get("licenseDeclared", "NOASSERTION") in ("NOASSERTION", "NONE"):
        unlicensed.append(name)
if missing or unlicensed:
    sys.exit(f"SBOM lacks modules: {missing}; has no license for: {unlicensed}")
if not any(n == "stdlib" for n, _ in pkgs):
    sys.exit("SBOM lacks the Go standard library")
print(f"ok: SBOM ({doc['spdxVersion']}) names the {sum(1 for _ in open(sys.argv[2]))} linked modules at their versions, each with a license, and Go's stdlib")
EOF

echo "--- .rpm"
rpm -qp --qf '%{NAME} %{LICENSE} %{ARCH}\n' "${rpm}" 2>/dev/null | grep -qx 'deployment-service-exporter Apache-2.0 x86_64' ||
  fail ".rpm metadata: $(rpm -qp --qf '%{NAME} %{LICENSE} %{ARCH}' "${rpm}" 2>/dev/null)"
have=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEFLAGS:fflags} %{FILENAMES}\n]' "${rpm}" 2>/dev/null | sort -k4)
want="-rw------- root:root cn /etc/default/deployment-service-exporter
drwxr-x--- root:deployment-service-exporter  /etc/deployment-service-exporter
-rwxr-xr-x root:root  /usr/bin/deployment_service_exporter
-rw-r--r-- root:root  /usr/lib/systemd/system/deployment-service-exporter.service"
while IFS= read -r line; do
  grep -qxF -- "${line}" <<<"${have}" || fail ".rpm lacks '${line}'; it has:
${have}"
done <<<"${want}"
for script in preinstall postinstall preuninstall postuninstall; do
  rpm -qp --scripts "${rpm}" 2>/dev/null | grep -q "^${script} scriptlet" || fail ".rpm has no ${script} scriptlet"
done
ok ".rpm: binary, unit, %config(noreplace) environment file (0600), key directory 0750 root:deployment-service-exporter, four scriptlets"

echo "--- .deb"
have=$(dpkg-deb -c "${deb}" | awk '{print $1, $2, $6}')
for line in "-rwxr-xr-x root/root ./usr/bin/deployment_service_exporter" \
  "-rw-r--r-- root/root ./usr/lib/systemd/system/deployment-service-exporter.service" \
  "-rw------- root/root ./etc/default/deployment-service-exporter" \
  "drwxr-x--- root/deployment-service-exporter ./etc/deployment-service-exporter/"; do
  grep -qxF -- "${line}" <<<"${have}" || fail ".deb lacks '${line}'"
done
dpkg-deb -f "${deb}" Package Version Architecture
ok ".deb: binary, unit, environment file (0600), key directory 0750 root:deployment-service-exporter"
if [[ "${INSTALL_CHECK:-0}" == 1 ]]; then
  "${repo}/packaging/test/deb_install.sh" "${deb}"
else
  echo "skip: installing the .deb (INSTALL_CHECK=1 runs packaging/test/deb_install.sh, as root, on a machine you can change)"
fi
echo "release check passed"
