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
#      the exporter binary (its --help) accepts.
#
# kustomize comes from PATH or $(go env GOPATH)/bin, else go install builds it.
# Environment: EXPORTER_BIN=path skips the build and uses that binary.
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=deploy/test/lib_k8s.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib_k8s.sh"

ensure_apt kubectl kubectl
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
