# Helpers of kubernetes.sh and helm.sh. Source it after lib.sh; do not run it.
# shellcheck shell=bash

# ensure_go_tool NAME MODULE@VERSION: prints the path of the tool NAME, from
# PATH or $(go env GOPATH)/bin (where a previous step or run may have built
# it), else built with go install.
ensure_go_tool() {
  local name=$1 module=$2 gobin
  if command -v "${name}" >/dev/null 2>&1; then
    command -v "${name}"
    return 0
  fi
  gobin="$(go env GOPATH)/bin/${name}"
  if [[ ! -x "${gobin}" ]]; then
    log "building ${module} with go install (a minute or more)"
    GOFLAGS=-mod=mod go install "${module}" >&2 || die "go install ${module} failed"
  fi
  echo "${gobin}"
}

# shellcheck disable=SC2154 # repo is set by lib.sh.
# readme_block MARKER: prints the first ```sh block of README.md that follows
# the line MARKER (an HTML comment, invisible on the rendered page), so that
# a check can run a quick start exactly as the README writes it.
readme_block() {
  markdown_block "${repo}/README.md" "$1" sh
}

# markdown_block FILE MARKER LANG: prints the first ```LANG block of the
# Markdown FILE that follows the line MARKER.
markdown_block() {
  local file=$1 marker=$2 lang=$3 block
  block=$(awk -v marker="${marker}" -v fence="\`\`\`${lang}" '
    $0 == marker { found = 1; next }
    found && !inside && $0 == fence { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }
  ' "${file}")
  [[ -n "${block}" ]] || die "${file#"${repo}/"} has no \`\`\`${lang} block after the line '${marker}'"
  printf '%s\n' "${block}"
}
