#!/usr/bin/env bash
# Checks the Helm chart deploy/helm/deployment-service-exporter without a
# cluster:
#   1. the chart's version and appVersion are the VERSION file's;
#   2. the chart's copies of the rule files (files/rules) are up to date with
#      deploy/prometheus/rules (tools/cmd/promrulegen -check -copy-to), and
#      those of the dashboards (files/dashboards) are grafana/dashboards';
#   3. `helm lint --strict` with each values file of the chart's ci/;
#   4. `helm template` with each of them renders objects that decode strictly
#      into their Kubernetes and Prometheus Operator types and pass
#      tools/cmd/k8scheck (the kinds and counts expected for the case, the
#      restricted security context, probes, resources, the key and modules
#      from Secret files, the targets each module's key may go to,
#      ServiceMonitors for /metrics and /probe, the ScrapeConfig on /sd, the
#      PrometheusRule equal to the rule files, NetworkPolicy and
#      PodDisruptionBudget, and container arguments the binary accepts); the
#      key given as a value appears nowhere but base64 in its Secret;
#      with ci/full-values.yaml, the multiple of
#      DeploymentServiceLocationCheckStale (prometheusRule.locationCheckStalePolls)
#      is the one given, the rules select its job names and are otherwise
#      the files' (promtool check rules accepts them), its scrape protocol
#      and histogram settings are on every ServiceMonitor and the
#      ScrapeConfig (and none without them), and the dashboard's ConfigMap
#      in its namespace holds grafana/dashboards with its default job; with
#      ci/sd-values.yaml the dashboards byte for byte;
#   5. without image values the Deployment runs the published image at the
#      chart's appVersion, and apiUrl with a key (existingSecret or value),
#      or demo=true, is all the chart needs; values the exporter would
#      refuse, or that watch nothing, fail the render with the message that
#      says what to set;
#   6. the chart, packaged and pushed with `helm push` to an OCI registry on
#      127.0.0.1 (tools/cmd/ociregistry), renders from oci:// exactly as
#      from its directory;
#   7. the README's Helm quick start, run as written against that registry
#      (oci://ghcr.io/deployment-service/charts becomes it; a dummy key;
#      kubectl stubbed out; `helm install` replaced by `helm template`), and
#      the chart README's /sd values example render manifests that pass the
#      same checks.
#
# Helm comes from PATH or $(go env GOPATH)/bin, else it is built with
# `go install` (a few minutes).
# Environment: EXPORTER_BIN=path skips the build and uses that binary.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=deploy/test/lib_k8s.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib_k8s.sh"

readonly helm_version=v3.22.0
# The Kubernetes version helm template renders for. A helm built with go
# install believes in v1.20, older than the chart's kubeVersion allows.
readonly kube_version=1.33.0
chart="${repo}/deploy/helm/deployment-service-exporter"

start_work
export LC_ALL=C # the rule files' order, as Helm's .Files.Glob sorts them

helm=$(ensure_go_tool helm "helm.sh/helm/v3/cmd/helm@${helm_version}")
log "using $("${helm}" version --short)"

app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "${chart}/Chart.yaml")
chart_version=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "${chart}/Chart.yaml")
version=$(tr -d '[:space:]' <"${repo}/VERSION")
[[ "${app_version}" == "${version}" ]] || die "Chart.yaml appVersion ${app_version} is not VERSION ${version}"
[[ "${chart_version}" == "${version}" ]] || die "Chart.yaml version ${chart_version} is not VERSION ${version}: a tag publishes the chart at VERSION"

# The chart's dashboards are copies of grafana/dashboards, and nothing else.
for f in "${repo}"/grafana/dashboards/*.json "${chart}"/files/dashboards/*.json; do
  cmp -s "${repo}/grafana/dashboards/$(basename "${f}")" "${chart}/files/dashboards/$(basename "${f}")" ||
    die "files/dashboards/$(basename "${f}") is not a copy of grafana/dashboards/$(basename "${f}"): cp grafana/dashboards/*.json ${chart#"${repo}/"}/files/dashboards/"
done

(cd "${repo}/tools" && go run ./cmd/promrulegen -check \
  -copy-to ../deploy/helm/deployment-service-exporter/files/rules ../deploy/prometheus/rules/*.yml)
# The PrometheusRule the rule files make, to compare the chart's with.
(cd "${repo}/tools" && go run ./cmd/promrulegen -out "${work}/rules.yaml" ../deploy/prometheus/rules/*.yml)

exporter=$(exporter_binary "${work}")
"${exporter}" --help >"${work}/help.txt" 2>&1 || die "${exporter} --help failed: $(cat "${work}/help.txt")"
k8scheck=$(tools_binary k8scheck "${work}")

# case VALUES-FILE WANT [K8SCHECK-ARGS...]: lint, render and check one case.
check_case() {
  local values=$1 want=$2
  shift 2
  local name
  name=$(basename "${values}" .yaml)
  "${helm}" lint --strict "${chart}" -f "${values}" >"${work}/lint.txt" 2>&1 ||
    die "helm lint --strict -f ${values}: $(cat "${work}/lint.txt")"
  "${helm}" template dse "${chart}" --kube-version "${kube_version}" --namespace observability -f "${values}" >"${work}/${name}.yaml" 2>"${work}/err.txt" ||
    die "helm template -f ${values}: $(cat "${work}/err.txt")"
  log "ok: ${name}: helm lint --strict, helm template rendered $(grep -c '^kind:' "${work}/${name}.yaml") objects"
  "${k8scheck}" -help "${work}/help.txt" -rules "${work}/rules.yaml" -want "${want}" "$@" "${work}/${name}.yaml" ||
    die "k8scheck on the ${name} case (rendered: ${work}/${name}.yaml)"
}

ci="${chart}/ci"
check_case "${ci}/default-values.yaml" Deployment=1,Service=1,ServiceAccount=1 \
  -external-secret deployment-service-api-key
# Without image values, the published image at the chart's appVersion.
published="ghcr.io/deployment-service/deployment-service-exporter:${app_version}"
grep -qxF "          image: \"${published}\"" "${work}/default-values.yaml" ||
  die "ci/default-values.yaml (no image values) does not run ${published}: $(grep 'image:' "${work}/default-values.yaml")"
log "ok: the default image is ${published}"
check_case "${ci}/demo-values.yaml" Deployment=1,Service=1,ServiceAccount=1
check_case "${ci}/probe-values.yaml" Deployment=1,Service=1,ServiceAccount=1,ServiceMonitor=3 \
  -external-secret deployment-service-exporter-modules -external-secret deployment-service-keys
check_case "${ci}/sd-values.yaml" Deployment=1,Service=1,ServiceAccount=1,Secret=1,ServiceMonitor=1,ScrapeConfig=1,PrometheusRule=1,ConfigMap=1 \
  -external-secret deployment-service-api-key -external-secret deployment-service-staging-key \
  -dashboards "${repo}/grafana/dashboards" -dashboard-namespace observability
# full-values.yaml sets prometheusRule.locationCheckStalePolls to 8: the
# rendered rules are the rule files' with that multiple.
stale_record=instance:deployment_service_location_check_stale_after:poll_intervals
stale_expr=$(awk -v r="${stale_record}" '$0 ~ "record: " r "$" { getline; sub(/^ *expr: */, ""); print; exit }' \
  "${repo}/deploy/prometheus/rules/recording.yml")
[[ "${stale_expr}" =~ ^5\ \+\  ]] || die "recording.yml: ${stale_record} is '${stale_expr}', want '5 + ...'"
grep -qx '  locationCheckStalePolls: 8' "${ci}/full-values.yaml" || die "full-values.yaml must set prometheusRule.locationCheckStalePolls: 8"
check_case "${ci}/full-values.yaml" \
  Deployment=1,Service=1,ServiceAccount=1,Secret=2,ServiceMonitor=3,ScrapeConfig=1,PrometheusRule=1,NetworkPolicy=1,PodDisruptionBudget=1,ConfigMap=1 \
  -external-secret deployment-service-keys -rule-expr "${stale_record}=8${stale_expr#5}" \
  -job dse_metrics -probe-job dse_probe -dashboards "${repo}/grafana/dashboards" -dashboard-namespace grafana
# Its rules, which select its own job names, are a rule file promtool takes.
ensure_apt promtool prometheus
awk '/^kind: PrometheusRule$/ { pr = 1 } /^---/ { pr = 0 } pr && /^spec:$/ { spec = 1; next } pr && spec { sub(/^  /, ""); print }' \
  "${work}/full-values.yaml" >"${work}/full-rules.yml"
promtool check rules "${work}/full-rules.yml" >"${work}/promtool.txt" 2>&1 ||
  die "promtool check rules refuses the rules of full-values.yaml: $(cat "${work}/promtool.txt")"
[[ $(grep -c 'up{job="dse_metrics"}' "${work}/full-rules.yml") -eq 2 ]] ||
  die "full-values.yaml: DeploymentServiceExporterDown and DeploymentServiceExporterAbsent do not select job=\"dse_metrics\""
log "ok: promtool check rules accepts the rules of full-values.yaml, which select its job dse_metrics"
# Its scrape settings are on each of its 3 ServiceMonitors and its ScrapeConfig;
# without them (sd-values.yaml), none is rendered and Prometheus' defaults hold.
for setting in "scrapeProtocols:" "  - OpenMetricsText1.0.0" "fallbackScrapeProtocol: PrometheusText0.0.4" \
  "scrapeNativeHistograms: false" "scrapeClassicHistograms: false" "convertClassicHistogramsToNHCB: true"; do
  [[ $(grep -cxF "  ${setting}" "${work}/full-values.yaml") -eq 4 ]] ||
    die "full-values.yaml: want '${setting}' in the spec of 3 ServiceMonitors and 1 ScrapeConfig, have $(grep -cxF "  ${setting}" "${work}/full-values.yaml")"
done
if grep -qE 'scrapeProtocols|fallbackScrapeProtocol|HistogramsToNHCB|(Native|Classic)Histograms' "${work}/sd-values.yaml"; then
  die "sd-values.yaml sets no scrape settings, yet they are rendered: $(grep -E 'scrapeProtocols|Histograms' "${work}/sd-values.yaml")"
fi
log "ok: the scrape protocol and histogram settings reach every ServiceMonitor and the ScrapeConfig, and only when set"
# The chart README's /sd values example (in a directory of its own:
# check_case writes the render to ${work}).
mkdir -p "${work}/values"
markdown_block "${chart}/README.md" '<!-- values: /probe through /sd (checked by deploy/test/helm.sh and configcheck.sh) -->' yaml \
  >"${work}/values/readme-sd-values.yaml"
check_case "${work}/values/readme-sd-values.yaml" Deployment=1,Service=1,ServiceAccount=1,Secret=1,ServiceMonitor=1,ScrapeConfig=1 \
  -external-secret deployment-service-api-key -external-secret deployment-service-staging-key
n_cases=$(find "${ci}" -name '*-values.yaml' | wc -l)
[[ "${n_cases}" -eq 5 ]] || die "ci/ has ${n_cases} values files; give each a case here"

# The key given as a value is only ever base64 in its Secret: never an
# argument, an environment value or an annotation.
key=$(sed -n 's/^  value: //p' "${ci}/full-values.yaml")
[[ -n "${key}" ]] || die "no apiKey.value in full-values.yaml"
if grep -qF -- "${key}" "${work}/full-values.yaml"; then
  die "the API key appears in clear in the rendered manifests"
fi
grep -qF -- "$(printf '%s' "${key}" | base64)" "${work}/full-values.yaml" || die "the API key's Secret is missing"
log "ok: the API key appears only base64-encoded in its Secret"

# refuse MESSAGE HELM-ARGS...: the render must fail, saying MESSAGE.
refuse() {
  local want=$1
  shift
  if "${helm}" template dse "${chart}" --kube-version "${kube_version}" "$@" >/dev/null 2>"${work}/err.txt"; then
    die "helm template $* rendered; want a failure saying: ${want}"
  fi
  grep -qF -- "${want}" "${work}/err.txt" || die "helm template $*: want an error saying '${want}', got: $(cat "${work}/err.txt")"
}
url=(--set apiUrl=https://deploy.example.com)
key=(--set apiKey.existingSecret=k)
modules=(--set-json 'config.modules={"default":{"targets":["https://a.example.com","https://*.b.example.com"],"http_client_config":{"authorization":{"type":"Token","credentials_file":"/k"}}}}')
refuse "image.repository is empty" --set image.repository= "${url[@]}" "${key[@]}"
refuse "nothing to watch"
refuse "apiUrl needs a key" "${url[@]}"
refuse "must be an http:// or https:// URL" "${key[@]}" --set apiUrl=deploy.example.com
refuse "demo and apiUrl conflict" "${url[@]}" "${key[@]}" --set demo=true
refuse "apiKey.existingSecret and apiKey.value conflict" "${url[@]}" "${key[@]}" --set apiKey.value=x
refuse "is not sha256:" "${url[@]}" "${key[@]}" --set image.digest=latest
refuse "serviceMonitor.targets are polled through /probe" "${url[@]}" "${key[@]}" \
  --set 'serviceMonitor.targets[0].name=a' --set 'serviceMonitor.targets[0].url=https://a.example.com'
refuse 'module "staging" is not in config.modules' "${modules[@]}" \
  --set 'serviceMonitor.targets[0].name=a' --set 'serviceMonitor.targets[0].url=https://a.example.com' \
  --set 'serviceMonitor.targets[0].module=staging'
refuse 'name "Prod" must be lower-case' "${modules[@]}" \
  --set 'serviceMonitor.targets[0].name=Prod' --set 'serviceMonitor.targets[0].url=https://a.example.com'
refuse 'name "a" is given twice' "${modules[@]}" \
  --set 'serviceMonitor.targets[0].name=a' --set 'serviceMonitor.targets[0].url=https://a.example.com' \
  --set 'serviceMonitor.targets[1].name=a' --set 'serviceMonitor.targets[1].url=https://b.example.com'
refuse "url \"ftp://a\" must be the http:// or https:// base URL" "${modules[@]}" \
  --set 'serviceMonitor.targets[0].name=a' --set 'serviceMonitor.targets[0].url=ftp://a'
refuse "additional properties 'apikey' not allowed" "${url[@]}" "${key[@]}" --set apikey.value=x
refuse "/prometheusRule/locationCheckStalePolls': minimum: got 0, want 1" "${url[@]}" "${key[@]}" \
  --set prometheusRule.enabled=true --set prometheusRule.locationCheckStalePolls=0
# A module's key goes only to the services it lists (issue 18).
refuse "config.modules.default carries credentials but lists no targets" \
  --set-json 'config.modules={"default":{"http_client_config":{"authorization":{"type":"Token","credentials_file":"/k"}}}}'
refuse "config.modules.default carries credentials but lists no targets" \
  --set-json 'config.modules={"default":{"http_client_config":{"http_headers":{"X-Key":{"files":["/k"]}}}}}'
refuse "got string, want array" --set-json 'config.modules={"default":{"targets":"https://a.example.com"}}'
refuse 'module "default" does not list https://c.b.example.com/x under targets' "${modules[@]}" \
  --set 'serviceMonitor.targets[0].name=a' --set 'serviceMonitor.targets[0].url=https://c.b.example.com/x'
refuse "scrapeConfig probes the targets that config.modules lists" "${url[@]}" "${key[@]}" --set scrapeConfig.enabled=true
refuse 'scrapeConfig.modules: module "x" is not in config.modules' "${modules[@]}" \
  --set scrapeConfig.enabled=true --set 'scrapeConfig.modules[0]=x'
refuse "no module it discovers lists a concrete target" --set scrapeConfig.enabled=true \
  --set-json 'config.modules={"default":{"targets":["https://*.b.example.com"],"http_client_config":{"authorization":{"type":"Token","credentials_file":"/k"}}}}'
refuse 'the ScrapeConfig (scrapeConfig.enabled) already probes https://a.example.com with module "default"' \
  "${modules[@]}" --set scrapeConfig.enabled=true \
  --set 'serviceMonitor.targets[0].name=a' --set 'serviceMonitor.targets[0].url=https://A.example.com:443/'
log "ok: 22 kinds of wrong values fail the render with a message saying what to set"

# Nothing but apiUrl and a key (either way), or demo=true, renders.
for minimal in "--set apiUrl=https://deploy.example.com --set apiKey.existingSecret=k" \
  "--set apiUrl=https://deploy.example.com --set apiKey.value=k" "--set demo=true"; do
  # shellcheck disable=SC2086 # the words of ${minimal} are separate arguments.
  "${helm}" template dse "${chart}" --kube-version "${kube_version}" ${minimal} >/dev/null 2>"${work}/err.txt" ||
    die "helm template ${minimal} failed: $(cat "${work}/err.txt")"
done
log "ok: apiUrl with a key (existingSecret or value), or demo=true, is all the chart needs"

# What the chart accepts of targets, the exporter accepts too: a spelling
# that differs only in case, default port and trailing slash, a "*" host
# label, a "*" port, and allow_any_target render.
"${helm}" template dse "${chart}" --kube-version "${kube_version}" \
  --set-json 'config.modules={"default":{"targets":["HTTPS://A.example.com:443/","https://*.b.example.com","http://127.0.0.1:*/deploy"],"http_client_config":{"authorization":{"type":"Token","credentials_file":"/k"}}},"any":{"allow_any_target":true,"http_client_config":{"authorization":{"type":"Token","credentials_file":"/k"}}}}' \
  --set 'serviceMonitor.targets[0].name=a' --set 'serviceMonitor.targets[0].url=https://a.example.com' \
  --set 'serviceMonitor.targets[1].name=b' --set 'serviceMonitor.targets[1].url=https://x.b.example.com/' \
  --set 'serviceMonitor.targets[2].name=c' --set 'serviceMonitor.targets[2].url=http://127.0.0.1:8080/deploy' \
  --set 'serviceMonitor.targets[3].name=d' --set 'serviceMonitor.targets[3].url=https://elsewhere.example.com' \
  --set 'serviceMonitor.targets[3].module=any' >/dev/null 2>"${work}/err.txt" ||
  die "targets that their modules list were refused: $(cat "${work}/err.txt")"
log "ok: targets listed by their modules (spelling, * label, * port, allow_any_target) render"

# The chart as an OCI artifact, as each tag publishes it: packaged, pushed to
# a registry of this check's own on 127.0.0.1, rendered from there exactly
# as from its directory.
ociregistry=$(tools_binary ociregistry "${work}")
registry="127.0.0.1:$(free_port)"
"${ociregistry}" -listen "${registry}" >/dev/null 2>"${work}/registry.log" &
pids+=($!)
wait_http "http://${registry}/v2/" 30 || die "the OCI registry did not start on ${registry}"
"${helm}" package "${chart}" --destination "${work}/package" >/dev/null
"${helm}" push "${work}/package/deployment-service-exporter-${version}.tgz" "oci://${registry}/charts" --plain-http \
  >"${work}/push.txt" 2>&1 || die "helm push to oci://${registry}/charts failed: $(cat "${work}/push.txt")"
"${helm}" template dse "oci://${registry}/charts/deployment-service-exporter" --version "${version}" --plain-http \
  --kube-version "${kube_version}" --namespace observability -f "${ci}/full-values.yaml" >"${work}/oci.yaml" 2>"${work}/err.txt" ||
  die "helm template oci://${registry}/charts/deployment-service-exporter: $(cat "${work}/err.txt")"
cmp -s "${work}/oci.yaml" "${work}/full-values.yaml" ||
  die "the chart pulled from oci://${registry}/charts renders otherwise than its directory: $(diff "${work}/full-values.yaml" "${work}/oci.yaml" | head -n 20)"
log "ok: helm push sent the chart ${version} to oci://${registry}/charts, and it renders from there as from its directory"

# The quick start, as README.md writes it, from that registry.
readme_block '<!-- quick start: helm (run by deploy/test/helm.sh) -->' >"${work}/quickstart.sh"
published_chart=oci://ghcr.io/deployment-service/charts/deployment-service-exporter
grep -qF "helm install deployment-service-exporter ${published_chart}" "${work}/quickstart.sh" ||
  die "README.md's Helm quick start does not install ${published_chart}"
cat >"${work}/run.sh" <<EOF
set -euo pipefail
export KEY='ci-dummy-key-${RANDOM}'
# kubectl: only what the quick start needs, recorded instead of done.
kubectl() {
  local args="\$*"
  case "\${args}" in
    "create namespace "*) ;;
    *"create secret generic "*)
      local rest=\${args#*create secret generic }
      printf '%s\n' "\${rest%% *}" >>'${work}/secrets'
      [[ "\${args}" == *" --from-file=api-key="* ]] || { echo "the key's Secret needs the key api-key (apiKey.existingSecretKey): \${args}" >&2; return 1; }
      cat >/dev/null ;;
    *) echo "the quick start runs kubectl \${args}; this check does not know it" >&2; return 1 ;;
  esac
}
# helm install from the published registry: helm template from this one.
helm() {
  [[ "\$1" == install ]] || { echo "the quick start runs helm \$*; this check knows only helm install" >&2; return 1; }
  shift
  local args=() a
  for a in "\$@"; do args+=("\${a/#'${published_chart}'/oci://${registry}/charts/deployment-service-exporter}"); done
  '${helm}' template "\${args[@]}" --plain-http --kube-version '${kube_version}' >'${work}/quickstart.yaml'
}
cd '${repo}'
source '${work}/quickstart.sh'
EOF
bash "${work}/run.sh" || die "the README's Helm quick start failed (script: ${work}/quickstart.sh)"
[[ -s "${work}/quickstart.yaml" ]] || die "the README's Helm quick start installs nothing"
external=()
while read -r secret; do external+=(-external-secret "${secret}"); done <"${work}/secrets"
"${k8scheck}" -help "${work}/help.txt" -rules "${work}/rules.yaml" "${external[@]}" \
  -want Deployment=1,Service=1,ServiceAccount=1,ServiceMonitor=1,PrometheusRule=1 "${work}/quickstart.yaml" ||
  die "k8scheck on the README's Helm quick start (rendered: ${work}/quickstart.yaml)"
log "ok: the README's Helm quick start ran as written"
