#!/usr/bin/env bash
# Checks the Kubernetes manifests without a cluster:
#   1. deploy/kubernetes/prometheusrule.yaml is up to date with
#      deploy/prometheus/rules (tools/cmd/promrulegen -check);
#   2. the base ships no API key: deploy/kubernetes/api-key is git-ignored,
#      and the base does not render without it;
#   3. the README's Kubernetes quick start, run as written in a copy of the
#      base (a dummy key; `kubectl apply -k` replaced by `kubectl kustomize`;
#      the real kustomize CLI), renders the published image at the VERSION
#      file's version, the URL and key it sets, the key's Secret under a
#      fixed name (so a new key needs no restart); `kustomize edit set image`
#      as the README tells it, in another copy, runs an image of one's own;
#   4. every rendered object decodes strictly into its Kubernetes or
#      Prometheus Operator API type, and the objects pass tools/cmd/k8scheck:
#      restricted security context, resources, probes, the API key read from
#      a Secret file through --api.key-file, connected selectors and ports,
#      rules equal to deploy/prometheus/rules, and container arguments that
#      the exporter binary (its --help) accepts;
#   5. the component components/grafana-dashboard, with the base and alone in
#      a namespace of its own, renders a ConfigMap labelled
#      grafana_dashboard: "1" holding grafana/dashboards byte for byte (its
#      copies are the files');
#   6. deploy/README.md's recipe for another job name, run in a copy: the
#      rules select the new job and no other, promtool accepts them and the
#      compose and Prometheus configurations that scrape it, and the base
#      with the dashboard component passes the checks of 4 and 5 with that
#      job (the ServiceMonitor sets it, the rules and the dashboard's
#      default select it).
#
# kustomize comes from PATH or $(go env GOPATH)/bin, else go install builds it.
# Environment: EXPORTER_BIN=path skips the build and uses that binary.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=deploy/test/lib_k8s.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib_k8s.sh"

ensure_apt kubectl kubectl
ensure_apt promtool prometheus
kustomize=$(ensure_go_tool kustomize sigs.k8s.io/kustomize/kustomize/v5@v5.5.0)

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

(cd "${repo}/tools" && go run ./cmd/promrulegen -check \
  -out ../deploy/kubernetes/prometheusrule.yaml ../deploy/prometheus/rules/*.yml)
(cd "${repo}/tools" && go run ./cmd/promrulegen -out "${work}/rules.yaml" ../deploy/prometheus/rules/*.yml)

if git -C "${repo}" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "${repo}" check-ignore -q deploy/kubernetes/api-key || die "deploy/kubernetes/api-key is not git-ignored"
  [[ -z "$(git -C "${repo}" ls-files deploy/kubernetes/api-key)" ]] || die "deploy/kubernetes/api-key is committed"
fi

# A copy of the repository's base, without any key a developer put there.
mkdir -p "${work}/repo/deploy"
cp -R "${repo}/deploy/kubernetes" "${work}/repo/deploy/kubernetes"
rm -f "${work}/repo/deploy/kubernetes/api-key"
if kubectl kustomize "${work}/repo/deploy/kubernetes" >/dev/null 2>&1; then
  die "the base renders without deploy/kubernetes/api-key: it must not ship a key"
fi
log "ok: the base ships no key (api-key is git-ignored, and needed to render)"

# The quick start, as README.md writes it.
key="ci-dummy-key-$RANDOM"
readme_block '<!-- quick start: kustomize (run by deploy/test/kubernetes.sh) -->' >"${work}/quickstart.sh"
cat >"${work}/run.sh" <<EOF
set -euo pipefail
export KEY='${key}'
kustomize() { '${kustomize}' "\$@"; }
kubectl() {
  if [[ "\$1 \$2" != "apply -k" ]]; then
    echo "the quick start runs kubectl \$*; this check knows only kubectl apply -k" >&2
    return 1
  fi
  command kubectl kustomize "\$3" >'${work}/rendered.yaml'
}
cd '${work}/repo'
source '${work}/quickstart.sh'
EOF
bash "${work}/run.sh" || die "the README's kustomize quick start failed (script: ${work}/quickstart.sh)"
[[ -s "${work}/rendered.yaml" ]] || die "the README's kustomize quick start applies nothing"
log "ok: the README's kustomize quick start ran as written and rendered $(grep -c '^kind:' "${work}/rendered.yaml") objects"

# What the quick start set is what the manifests hold, with the published
# image at this version.
image="ghcr.io/deployment-service/deployment-service-exporter:$(tr -d '[:space:]' <"${repo}/VERSION")"
sed -n 's/^ *image: //p' "${work}/rendered.yaml" | grep -qxF -- "${image}" ||
  die "the Deployment does not run the published image ${image} (it runs: $(sed -n 's/^ *image: //p' "${work}/rendered.yaml"))"
grep -qE '^  DEPLOYMENT_SERVICE_URL: https://' "${work}/rendered.yaml" ||
  die "the ConfigMap has no DEPLOYMENT_SERVICE_URL"
if grep -q 'deployment-service.example.com' "${work}/rendered.yaml"; then
  die "the quick start leaves the base's placeholder URL"
fi
grep -qE "^  api-key: $(printf '%s' "${key}" | base64)$" "${work}/rendered.yaml" || die "the Secret does not hold the key of api-key"
awk '/^kind: Secret$/ { s = 1 } s && /^  name: / { print $2; exit }' "${work}/rendered.yaml" | grep -qx deployment-service-exporter ||
  die "the key's Secret must keep the name deployment-service-exporter (no hash suffix), so a new key needs no restart"
log "ok: image ${image}, the service URL and the key from api-key are in the manifests"

# An image of one's own, as the README says: the name the base's images:
# entry matches is deployment-service-exporter.
mkdir -p "${work}/own/deploy"
cp -R "${repo}/deploy/kubernetes" "${work}/own/deploy/kubernetes"
printf '%s' "${key}" >"${work}/own/deploy/kubernetes/api-key"
own=registry.example.com/deployment-service-exporter:1.2.3
(cd "${work}/own/deploy/kubernetes" && "${kustomize}" edit set image "deployment-service-exporter=${own}")
tr '\n' ' ' <"${repo}/README.md" | grep -qF 'kustomize edit set image deployment-service-exporter=REGISTRY/deployment-service-exporter:VERSION' ||
  die "README.md no longer tells how to run an image of one's own with kustomize edit set image deployment-service-exporter=..."
kubectl kustomize "${work}/own/deploy/kubernetes" | sed -n 's/^ *image: //p' | grep -qxF -- "${own}" ||
  die "kustomize edit set image deployment-service-exporter=${own} does not change the Deployment's image"
log "ok: kustomize edit set image deployment-service-exporter=... runs an image of one's own"

exporter=$(exporter_binary "${work}")
"${exporter}" --help >"${work}/help.txt" 2>&1 || die "${exporter} --help failed: $(cat "${work}/help.txt")"

k8scheck=$(tools_binary k8scheck "${work}")
"${k8scheck}" -help "${work}/help.txt" -rules "${work}/rules.yaml" "${work}/rendered.yaml"

# The dashboard component: its copies are grafana/dashboards', and it renders
# them byte for byte with the base, or alone in Grafana's namespace.
component="${repo}/deploy/kubernetes/components/grafana-dashboard"
for f in "${repo}"/grafana/dashboards/*.json "${component}"/*.json; do
  cmp -s "${repo}/grafana/dashboards/$(basename "${f}")" "${component}/$(basename "${f}")" ||
    die "components/grafana-dashboard/$(basename "${f}") is not a copy of grafana/dashboards/$(basename "${f}"): cp grafana/dashboards/*.json deploy/kubernetes/components/grafana-dashboard/"
done
# overlay DIR BASE_DIR NAMESPACE [COMPONENT_DIR]: an overlay of the base
# (when BASE_DIR is not empty) with the dashboard component, in NAMESPACE.
# kustomize takes only relative paths.
overlay() {
  mkdir -p "$1"
  {
    printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\n' "$3"
    [[ -z "$2" ]] || printf 'resources:\n  - %s\n' "$(realpath --relative-to="$1" "$2")"
    printf 'components:\n  - %s\n' "$(realpath --relative-to="$1" "${4:-${component}}")"
  } >"$1/kustomization.yaml"
}
printf '%s' "${key}" >"${work}/repo/deploy/kubernetes/api-key"
overlay "${work}/with-base" "${work}/repo/deploy/kubernetes" monitoring
kubectl kustomize "${work}/with-base" >"${work}/with-base.yaml"
want_dashboard=Deployment=1,Service=1,Secret=1,ConfigMap=2,ServiceMonitor=1,PrometheusRule=1
"${k8scheck}" -help "${work}/help.txt" -rules "${work}/rules.yaml" -want "${want_dashboard}" \
  -dashboards "${repo}/grafana/dashboards" -dashboard-namespace monitoring "${work}/with-base.yaml"
overlay "${work}/alone" "" grafana
kubectl kustomize "${work}/alone" >"${work}/alone.yaml"
"${k8scheck}" -want ConfigMap=1 -dashboards "${repo}/grafana/dashboards" -dashboard-namespace grafana "${work}/alone.yaml"
log "ok: components/grafana-dashboard renders the dashboards byte for byte, with the base and alone"

# Another job name, as deploy/README.md says, in a copy of what it edits.
mkdir -p "${work}/jobs"
cp -R "${repo}/deploy" "${repo}/grafana" "${work}/jobs/"
printf '%s' "${key}" >"${work}/jobs/deploy/kubernetes/api-key"
markdown_block "${repo}/deploy/README.md" '<!-- recipe: another job name (run by deploy/test/kubernetes.sh) -->' sh >"${work}/jobs.sh"
(cd "${work}/jobs" && bash "${work}/jobs.sh") || die "deploy/README.md's recipe for another job name failed"
job=$(sed -n 's/^job=\([a-z_]*\).*/\1/p' "${work}/jobs.sh")
[[ -n "${job}" && "${job}" != deployment_service ]] || die "deploy/README.md's recipe sets no job=NAME first"
rules_dir="${work}/jobs/deploy/prometheus/rules"
if grep -rn 'job="deployment_service"' "${rules_dir}" "${work}/jobs/deploy/kubernetes/prometheusrule.yaml"; then
  die "after the recipe, rules still select job=\"deployment_service\""
fi
[[ $(grep -c "up{job=\"${job}\"}" "${rules_dir}/alerts.yml") -eq 2 ]] ||
  die "after the recipe, DeploymentServiceExporterDown and DeploymentServiceExporterAbsent do not select job=\"${job}\""
promtool check rules "${rules_dir}"/*.yml >"${work}/promtool.txt" 2>&1 ||
  die "promtool check rules refuses the renamed rules: $(cat "${work}/promtool.txt")"
for config in compose/prometheus.yml prometheus/prometheus.yml prometheus/prometheus-sd.yml; do
  grep -qx "  - job_name: ${job}" "${work}/jobs/deploy/${config}" || die "after the recipe, deploy/${config} scrapes no job ${job}"
  promtool check config "${work}/jobs/deploy/${config}" >"${work}/promtool.txt" 2>&1 ||
    die "promtool check config refuses deploy/${config} after the recipe: $(cat "${work}/promtool.txt")"
done
overlay "${work}/jobs-overlay" "${work}/jobs/deploy/kubernetes" monitoring "${work}/jobs/deploy/kubernetes/components/grafana-dashboard"
kubectl kustomize "${work}/jobs-overlay" >"${work}/jobs.yaml"
"${k8scheck}" -help "${work}/help.txt" -job "${job}" -rules "${work}/rules.yaml" -want "${want_dashboard}" \
  -dashboards "${repo}/grafana/dashboards" -dashboard-namespace monitoring "${work}/jobs.yaml"
log "ok: deploy/README.md's recipe renames the job ${job} in the rules, the Prometheus, compose and kustomize configurations and the dashboards"
