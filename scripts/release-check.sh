#!/usr/bin/env bash
# Checks the release without publishing anything (make release-check; .ci/run
# runs it): `goreleaser check`, then a snapshot release of .goreleaser.yaml
# for linux/amd64 only, and what it produced:
#
#   - exactly one archive and one FIPS 140-3 archive, an SBOM for each, a
#     .deb, a .rpm and sha256sums.txt, which lists the other six with their
#     right sums, and its signature, made by a stand-in cosign that checks
#     the arguments .goreleaser.yaml's signs give it (no network here);
#   - each archive: one directory with the binary (0755), LICENSE, NOTICE,
#     README.md, CHANGELOG.md and THIRD_PARTY_LICENSES;
#   - each binary: built by go.mod's toolchain Go, the FIPS one with
#     GOFIPS140=v1.0.0 and FIPS mode on; the version from the tag
#     (GORELEASER_CURRENT_TAG, here v$(cat VERSION)), the commit, the branch
#     and the commit's date; and byte for byte the binary scripts/build.sh
#     makes with that toolchain from the same version, user, date and
#     GOFIPS140, so both use the same build flags;
#   - each SBOM: SPDX, naming every module linked into the binary at its
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
# scripts/build.sh): nothing else changed (checked: 3 lines differ, 2 added).
repo=${PWD}
out=${work}/dist
sed -e 's/^    goos: \[linux, darwin, windows\]$/    goos: [linux]/' \
  -e 's/^    goarch: \[amd64, arm64, arm\]$/    goarch: [amd64]/' \
  -e 's/^    goarch: \[amd64, arm64\]$/    goarch: [amd64]/' .goreleaser.yaml >"${work}/goreleaser.yaml"
printf '\ndist: %s\n' "${out}" >>"${work}/goreleaser.yaml"
changed=$(diff .goreleaser.yaml "${work}/goreleaser.yaml" | grep -c '^>' || true)
[[ "${changed}" == 5 ]] || fail "narrowing the targets changed ${changed} lines of .goreleaser.yaml, not 5 (3 targets, dist and a blank line): update the sed above"
# The Go that builds releases (go.mod's toolchain line) builds the references.
toolchain=$(sed -n 's/^toolchain //p' go.mod)
[[ -n "${toolchain}" ]] || fail "go.mod has no toolchain line"
# A stand-in cosign: it records its arguments and writes a bundle.
mkdir "${work}/bin"
cat >"${work}/bin/cosign" <<'COSIGN'
#!/usr/bin/env bash
set -euo pipefail
echo "$*" >>"${COSIGN_LOG}"
[[ "$1" == sign-blob && "$2" == --bundle=* && -f "${!#}" ]] || { echo "unexpected: cosign $*" >&2; exit 1; }
printf '{"stand-in": "%s"}\n' "$(sha256sum <"${!#}" | cut -d' ' -f1)" >"${2#--bundle=}"
COSIGN
chmod +x "${work}/bin/cosign"
export COSIGN_LOG=${work}/cosign.log

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
PATH="${work}/bin:${PATH}" goreleaser release --config "${work}/goreleaser.yaml" --snapshot --clean --skip=publish,docker \
  >"${work}/goreleaser.log" 2>&1 || { cat "${work}/goreleaser.log"; fail "goreleaser release --snapshot"; }
# The reference builds right away, so that they see the same working tree.
snapshot=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "${out}/metadata.json")
commit=$(git rev-parse HEAD)
short=$(git rev-parse --short=7 HEAD)
branch=$(git rev-parse --abbrev-ref HEAD)
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
for fips in off v1.0.0; do
  GOTOOLCHAIN="${toolchain}" GOFIPS140="${fips}" VERSION="${snapshot}" BUILD_USER=goreleaser BUILD_DATE="${date}" \
    OUTPUT="${work}/build.sh-binary-${fips}" ./scripts/build.sh 2>/dev/null
done

[[ "${snapshot}" == "${version}-SNAPSHOT-${short}" ]] || fail "snapshot version ${snapshot}, want ${version}-SNAPSHOT-${short}"
ok "snapshot version ${snapshot} (tag v${version} from VERSION)"

cd "${out}"
archive=deployment_service_exporter-${snapshot}.linux-amd64.tar.gz
fips_archive=deployment_service_exporter-fips-${snapshot}.linux-amd64.tar.gz
deb=deployment-service-exporter_${snapshot/-SNAPSHOT/~SNAPSHOT}_amd64.deb
rpm=$(ls deployment-service-exporter-*.x86_64.rpm 2>/dev/null || true)
for f in "${archive}" "${archive}.sbom.json" "${fips_archive}" "${fips_archive}.sbom.json" "${deb}" "${rpm}" sha256sums.txt; do
  [[ -n "${f}" && -f "${f}" ]] || fail "${f:-*.rpm} is missing; GoReleaser made: $(ls)"
done
produced=$(find . -maxdepth 1 -type f \( -name '*.tar.gz' -o -name '*.zip' -o -name '*.deb' -o -name '*.rpm' -o -name '*.sbom.json' \) | wc -l)
[[ "${produced}" == 6 ]] || fail "want two archives, their SBOMs, a .deb and a .rpm; GoReleaser made: $(ls)"
ok "made ${archive}, ${fips_archive}, their SBOMs, ${deb}, ${rpm}, sha256sums.txt"

echo "--- sha256sums.txt and its signature"
sha256sum --strict -c sha256sums.txt
[[ "$(awk '{print $2}' sha256sums.txt | sort)" == "$(printf '%s\n' "${archive}"{,.sbom.json} "${fips_archive}"{,.sbom.json} "${deb}" "${rpm}" | sort)" ]] ||
  fail "sha256sums.txt does not list exactly the two archives, their SBOMs, the .deb and the .rpm"
signed="sign-blob --bundle=${out}/sha256sums.txt.sigstore.json --yes ${out}/sha256sums.txt"
[[ "$(cat "${COSIGN_LOG}")" == "${signed}" ]] || fail "cosign ran as '$(cat "${COSIGN_LOG}")', want once as '${signed}'"
grep -qF "$(sha256sum <sha256sums.txt | cut -d' ' -f1)" sha256sums.txt.sigstore.json ||
  fail "sha256sums.txt.sigstore.json is not the signature of this sha256sums.txt"
python3 -c 'import json, sys; sys.exit(not any(a["name"] == "sha256sums.txt.sigstore.json" and a["type"] == "Signature" for a in json.load(open("artifacts.json"))))' ||
  fail "GoReleaser does not publish sha256sums.txt.sigstore.json as a signature"
ok "sha256sums.txt covers the six artifacts; cosign signs it once into sha256sums.txt.sigstore.json, published with the release"

# serves_tls BIN CIPHER: whether BIN --demo, serving TLS, completes a TLS 1.2
# handshake with CIPHER.
mkdir "${work}/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
  -keyout "${work}/tls/key.pem" -out "${work}/tls/cert.pem" 2>/dev/null
printf 'tls_server_config:\n  cert_file: %s\n  key_file: %s\n' "${work}/tls/cert.pem" "${work}/tls/key.pem" >"${work}/tls/web.yml"
serves_tls() {
  local port pid rc=0
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$1" --demo --web.listen-address="127.0.0.1:${port}" --web.config.file="${work}/tls/web.yml" 2>/dev/null &
  pid=$!
  for i in $(seq 300); do
    curl -fsk -o /dev/null "https://127.0.0.1:${port}/" && break
    ((i < 300)) || { kill "${pid}"; fail "$1 --demo does not serve TLS on ${port}"; }
    sleep 0.1
  done
  curl -fsk -o /dev/null --tls-max 1.2 --ciphers "$2" "https://127.0.0.1:${port}/" 2>/dev/null || rc=$?
  kill "${pid}"
  wait "${pid}" 2>/dev/null || true
  return "${rc}"
}

for fips in off v1.0.0; do
  if [[ "${fips}" == off ]]; then
    name=${archive} dir=deployment_service_exporter-${snapshot}.linux-amd64
  else
    name=${fips_archive} dir=deployment_service_exporter-fips-${snapshot}.linux-amd64
  fi
  echo "--- archive ${name}"
  want=$(printf '%s\n' "-rw-r--r-- ${dir}/CHANGELOG.md" "-rw-r--r-- ${dir}/LICENSE" "-rw-r--r-- ${dir}/NOTICE" \
    "-rw-r--r-- ${dir}/README.md" "-rw-r--r-- ${dir}/THIRD_PARTY_LICENSES" "-rwxr-xr-x ${dir}/deployment_service_exporter")
  have=$(tar -tvzf "${name}" | awk '{print $1, $6}' | sort -k2)
  [[ "${have}" == "${want}" ]] || fail "archive holds:
${have}
want:
${want}"
  ok "archive holds ${dir}/ with the binary, LICENSE, NOTICE, README.md, CHANGELOG.md, THIRD_PARTY_LICENSES"
  tar -xzf "${name}" -C "${work}"
  for f in LICENSE NOTICE; do
    cmp -s "${work}/${dir}/${f}" "${repo}/${f}" || fail "${f} in the archive differs from the repository's"
  done
  grep -q '^github.com/prometheus/client_golang ' "${work}/${dir}/THIRD_PARTY_LICENSES" || fail "THIRD_PARTY_LICENSES lacks the modules"

  echo "--- its binary"
  bin=${work}/${dir}/deployment_service_exporter
  "${bin}" --version | tee "${work}/version"
  grep -qF "version ${snapshot} (branch: ${branch}, revision: ${commit})" "${work}/version" || fail "--version: want version ${snapshot}, branch ${branch}, revision ${commit}"
  grep -qE "build date: +${date}$" "${work}/version" || fail "--version: want build date ${date} (the commit's)"
  ok "--version: the tag's version, the branch, the commit and its date"
  go version -m "${bin}" >"${work}/buildinfo"
  [[ "$(head -n 1 "${work}/buildinfo")" == *": ${toolchain}" ]] || fail "built by $(head -n 1 "${work}/buildinfo"), not ${toolchain} (go.mod's toolchain line)"
  if [[ "${fips}" == off ]]; then
    ! grep -q 'GOFIPS140\|fips140=' "${work}/buildinfo" || fail "the standard binary is built in FIPS mode"
  else
    grep -qE "^\s+build\s+GOFIPS140=${fips//./\\.}(-[0-9a-f]+)?$" "${work}/buildinfo" || fail "the FIPS binary is not built with GOFIPS140=${fips}"
    grep -qE '^\s+build\s+DefaultGODEBUG=(.*,)?fips140=on(,|$)' "${work}/buildinfo" || fail "the FIPS binary does not turn FIPS mode on"
  fi
  ok "built by ${toolchain} (go.mod's toolchain line) with GOFIPS140=${fips}"
  # FIPS mode at work: its TLS refuses ChaCha20-Poly1305, which FIPS 140-3
  # does not approve, and keeps AES-GCM.
  if [[ "${fips}" == off ]]; then
    serves_tls "${bin}" ECDHE-ECDSA-CHACHA20-POLY1305 || fail "the standard binary refuses TLS with ChaCha20-Poly1305"
  else
    ! serves_tls "${bin}" ECDHE-ECDSA-CHACHA20-POLY1305 || fail "the FIPS binary accepts TLS with ChaCha20-Poly1305: FIPS mode is off"
    serves_tls "${bin}" ECDHE-ECDSA-AES128-GCM-SHA256 || fail "the FIPS binary refuses TLS with AES-GCM"
  fi
  ok "its TLS (--web.config.file) $([[ "${fips}" == off ]] && echo accepts || echo refuses) ChaCha20-Poly1305"
  cmp -s "${bin}" "${work}/build.sh-binary-${fips}" ||
    fail "GoReleaser's binary differs from scripts/build.sh's with the same toolchain, version, user, date and GOFIPS140: the build flags drifted apart (compare .goreleaser.yaml's builds with scripts/build.sh)"
  ok "byte for byte the binary of scripts/build.sh (GOTOOLCHAIN=${toolchain} GOFIPS140=${fips} VERSION=${snapshot} BUILD_USER=goreleaser BUILD_DATE=${date}): the same flags"

  echo "--- its SBOM"
  go version -m "${bin}" | awk '$1 == "dep" { print $2, $3 }' | sort >"${work}/linked"
  python3 - "${name}.sbom.json" "${work}/linked" <<'EOF'
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
done

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
