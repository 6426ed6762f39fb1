#!/usr/bin/env bash
# Runs the exporter's own --config.check on every --config.file the
# repository ships, so that an example the exporter would refuse (a module
# with a key and no targets, say) fails CI rather than a user's start:
#   1. deploy/prometheus/modules.yml, its key files swapped for temporary
#      ones (as config/config_test.go's TestShippedExampleParses does);
#      then, with that file loaded, GET /sd must hand Prometheus exactly the
#      target and module pairs that deploy/prometheus/prometheus-probe.yml
#      probes by hand, so that the two Prometheus examples agree;
#   2. the configuration Secret that the Helm chart renders with each
#      ci/*-values.yaml that makes one, and with the "/probe through /sd"
#      values example of the chart's README;
#   3. deliberately bad files: a module with a key and no targets (and one
#      with a key in an http_headers file) must exit 1 with a line naming
#      the module; allow_any_target: true must make the first one OK.
# deploy/compose and deploy/kubernetes run no --config.file.
#
# Environment: EXPORTER_BIN=path uses that binary instead of building one.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=deploy/test/lib_k8s.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib_k8s.sh"

ensure_apt curl curl
ensure_apt jq jq

readonly kube_version=1.33.0 # as helm.sh
chart="${repo}/deploy/helm/deployment-service-exporter"

work=$(mktemp -d)
exporter_pid=
cleanup() {
  [[ -n "${exporter_pid}" ]] && { kill "${exporter_pid}" 2>/dev/null; wait "${exporter_pid}" 2>/dev/null; }
  rm -rf "${work}"
}
trap cleanup EXIT
exporter=$(exporter_binary "${work}")
helm=$(ensure_go_tool helm "helm.sh/helm/v3/cmd/helm@v3.22.0")

# localize FILE: rewrites FILE so that the absolute paths of its
# *_file: settings lie under ${work}/root, and makes each credentials_file
# there, holding a dummy key. Other files (CA, certificates) would need real
# content: the check then says which one is missing, and this function
# must learn to make it.
localize() {
  local file=$1 path
  sed -i -E "s#^([[:space:]]*[a-z_]*_file:[[:space:]]*)/#\1${work}/root/#" "${file}"
  while read -r path; do
    mkdir -p "$(dirname "${path}")"
    printf 'dummy-key-for-config-check\n' >"${path}"
  done < <(sed -n -E 's#^[[:space:]]*credentials_file:[[:space:]]*([^[:space:]#]+).*#\1#p' "${file}")
}

# check_ok NAME FILE: --config.check of FILE must print OK and exit 0.
check_ok() {
  local name=$1 file=$2 out
  if ! out=$("${exporter}" --config.check --config.file="${file}" 2>&1); then
    die "${name}: --config.check refused it: ${out}"
  fi
  [[ "${out}" == OK ]] || die "${name}: --config.check printed '${out}', want OK"
  log "ok: ${name}: --config.check says OK"
}

checked=0

# 1. The example of deploy/prometheus.
cp "${repo}/deploy/prometheus/modules.yml" "${work}/modules.yml"
localize "${work}/modules.yml"
check_ok deploy/prometheus/modules.yml "${work}/modules.yml"
checked=$((checked + 1))

# /sd of that file is what prometheus-probe.yml's static jobs probe: pairs
# "module target", one a line, sorted.
port=$(free_port)
"${exporter}" --config.file="${work}/modules.yml" --web.listen-address="127.0.0.1:${port}" \
  >"${work}/exporter.log" 2>&1 &
exporter_pid=$!
wait_http "http://127.0.0.1:${port}/-/ready" 20 ||
  die "the exporter with modules.yml did not become ready: $(tail -n 5 "${work}/exporter.log")"
curl -fsS "http://127.0.0.1:${port}/sd" | jq -r '.[] | .labels.module as $m | .targets[] | "\($m) \(.)"' |
  sort >"${work}/sd.txt"
kill "${exporter_pid}"
wait "${exporter_pid}" 2>/dev/null || true
exporter_pid=
# The static jobs of prometheus-probe.yml: a job's module is its
# params.module (default without), its targets the URLs of its
# static_configs.
awk '
  /^  - job_name:/ { probe = 0; module = "default"; next }
  /^    metrics_path: \/probe/ { probe = 1 }
  /^      module: \[/ { m = $0; gsub(/.*\[ *| *\].*/, "", m); module = m }
  probe && /https?:\/\// {
    line = $0
    sub(/#.*/, "", line)
    while (match(line, /https?:\/\/[^]"'\'' ,]+/)) {
      print module, substr(line, RSTART, RLENGTH)
      line = substr(line, RSTART + RLENGTH)
    }
  }
' "${repo}/deploy/prometheus/prometheus-probe.yml" | sort >"${work}/static.txt"
[[ -s "${work}/sd.txt" ]] || die "/sd of deploy/prometheus/modules.yml lists no target"
if ! diff -u "${work}/static.txt" "${work}/sd.txt" >"${work}/diff.txt"; then
  die "deploy/prometheus/prometheus-probe.yml (-) and /sd of modules.yml (+), as used by prometheus-sd.yml, probe different services: $(cat "${work}/diff.txt")"
fi
log "ok: /sd of modules.yml lists the $(wc -l <"${work}/sd.txt") target(s) that prometheus-probe.yml probes, with the same modules"

# 2. What the Helm chart renders. config_of RENDERED: prints the
# configuration file held by the chart's config Secret, or nothing.
config_of() {
  awk '
    /^# Source: .*\/templates\/secret-config\.yaml$/ { doc = 1; next }
    /^---/ { doc = 0; inside = 0 }
    doc && /^  config\.yml: \|/ { inside = 1; next }
    inside && /^    / { print substr($0, 5); next }
    inside && /^$/ { print; next }
    inside { inside = 0 }
  ' "$1"
}
# render_and_check NAME VALUES: renders the chart with VALUES and checks
# its configuration file; returns 1 when the chart makes none.
render_and_check() {
  local name=$1 values=$2 out="${work}/${1//\//_}"
  "${helm}" template dse "${chart}" --kube-version "${kube_version}" --namespace observability \
    -f "${values}" >"${out}.yaml" 2>"${work}/err.txt" || die "helm template ${name}: $(cat "${work}/err.txt")"
  config_of "${out}.yaml" >"${out}.yml"
  [[ -s "${out}.yml" ]] || return 1
  localize "${out}.yml"
  check_ok "${name}" "${out}.yml"
}
charts=0
for values in "${chart}"/ci/*-values.yaml; do
  if render_and_check "chart ci/$(basename "${values}")" "${values}"; then
    charts=$((charts + 1))
  fi
done
# sd-values.yaml and full-values.yaml make the Secret; the others take a
# Secret of the user's or have no modules.
[[ ${charts} -ge 2 ]] || die "only ${charts} of the chart's ci values files render a configuration file; want at least 2"
markdown_block "${chart}/README.md" '<!-- values: /probe through /sd (checked by deploy/test/helm.sh and configcheck.sh) -->' yaml \
  >"${work}/readme-values.yaml"
render_and_check "chart README's /sd values example" "${work}/readme-values.yaml" ||
  die "the chart README's /sd values example renders no configuration file"
checked=$((checked + charts + 1))

# 3. Bad files are refused, naming the module.
mkdir -p "${work}/bad"
printf 'dummy-key-for-config-check\n' >"${work}/bad/key"
cat >"${work}/bad/no-targets.yml" <<YAML
modules:
  harmless:
    timeout: 5s
  lonely:
    http_client_config:
      authorization:
        type: Token
        credentials_file: ${work}/bad/key
YAML
cat >"${work}/bad/header-no-targets.yml" <<YAML
modules:
  headed:
    http_client_config:
      http_headers:
        X-Api-Key:
          files: [${work}/bad/key]
YAML
# refused FILE MODULE: --config.check must exit 1, with a line on stderr
# naming MODULE and its missing targets, and print nothing on stdout.
refused() {
  local file=$1 module=$2 status=0
  "${exporter}" --config.check --config.file="${file}" >"${work}/out.txt" 2>"${work}/err.txt" || status=$?
  [[ ${status} -eq 1 ]] || die "$(basename "${file}"): --config.check exited ${status}, want 1: $(cat "${work}/out.txt" "${work}/err.txt")"
  [[ ! -s "${work}/out.txt" ]] || die "$(basename "${file}"): --config.check printed on stdout: $(cat "${work}/out.txt")"
  grep -q "module \"${module}\".*targets" "${work}/err.txt" ||
    die "$(basename "${file}"): --config.check does not name module ${module} and its targets: $(cat "${work}/err.txt")"
  log "ok: $(basename "${file}") is refused: $(head -n 1 "${work}/err.txt")"
}
refused "${work}/bad/no-targets.yml" lonely
refused "${work}/bad/header-no-targets.yml" headed
sed 's/^  lonely:$/  lonely:\n    allow_any_target: true/' "${work}/bad/no-targets.yml" >"${work}/bad/any-target.yml"
check_ok "the same module with allow_any_target: true" "${work}/bad/any-target.yml"

log "ok: ${checked} shipped configuration files pass --config.check; modules with a key and no targets are refused"
