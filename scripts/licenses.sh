#!/usr/bin/env bash
# Checks the licenses of the Go modules the exporter is built from, and
# writes the third-party license file shipped with every release.
#
#   scripts/licenses.sh check          fail unless every module has a license
#                                      compatible with Apache-2.0, and NOTICE
#                                      names every bundled module with a NOTICE
#   scripts/licenses.sh third-party F  write the licenses (and NOTICE files) of
#                                      Go and of every module linked into a
#                                      release binary to F
#
# Works offline: the license texts are read from the module cache, which
# `go mod download` (or any build) fills. A license is recognised by the
# operative sentences of its text, not by a file name or a guess; a text the
# script does not recognise fails the check, for a person to read it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The platforms of .goreleaser.yaml: the modules linked differ by GOOS (procfs
# and mdlayher/socket are Linux-only), so the shipped set is their union.
readonly targets=(linux/amd64 linux/arm64 linux/arm darwin/amd64 darwin/arm64 windows/amd64 windows/arm64)
# Licenses whose terms allow bundling into an Apache-2.0 binary: permissive,
# no copyleft. Anything else needs a person's decision before it ships.
readonly allowed=" Apache-2.0 MIT BSD-2-Clause BSD-3-Clause ISC Go-patent-grant "

# modules [go list args...]: "path version dir" of every dependency module.
modules() {
  go list -deps -f '{{with .Module}}{{if not .Main}}{{with .Replace}}{{.Path}} {{.Version}} {{.Dir}}{{else}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}{{end}}' "$@" | sort -u
}

# shipped: the modules linked into a release binary on any target.
shipped() {
  local t
  for t in "${targets[@]}"; do
    GOOS=${t%/*} GOARCH=${t#*/} modules .
  done | sort -u
}

# license_files DIR: the license, copying and patent files at a module's root.
license_files() {
  find "$1" -maxdepth 1 -type f | grep -iE '/(licen[cs]e|copying|unlicense|patents)([-._][^/]*)?$' | sort
}

# identify FILE: the licenses the text of FILE grants, space-separated, or
# "unknown". One file may hold several (klauspost/compress has three).
identify() {
  local text found=()
  text=$(tr -s '[:space:]' ' ' <"$1" | tr '[:upper:]' '[:lower:]')
  case "${text}" in
  *"gnu general public license"* | *"gnu lesser general public"* | *"gnu affero"* | *"mozilla public license"* | \
    *"eclipse public license"* | *"server side public license"* | *"business source license"* | *"creative commons"*)
    echo "not-permissive"
    return
    ;;
  esac
  [[ "${text}" == *"apache license"*"version 2.0"* ]] && found+=(Apache-2.0)
  [[ "${text}" == *"permission is hereby granted, free of charge, to any person obtaining a copy"* ]] && found+=(MIT)
  if [[ "${text}" == *"redistribution and use in source and binary forms, with or without modification, are permitted"* ]]; then
    if [[ "${text}" == *"endorse or promote products derived from this software"* ]]; then
      found+=(BSD-3-Clause)
    else
      found+=(BSD-2-Clause)
    fi
  fi
  [[ "${text}" == *"permission to use, copy, modify, and/or distribute this software for any purpose"* ]] && found+=(ISC)
  [[ "${text}" == *"additional ip rights grant (patents)"* ]] && found+=(Go-patent-grant)
  if ((${#found[@]} == 0)); then
    echo unknown
  else
    echo "${found[*]}"
  fi
}

check() {
  local path version dir files f lic l bad=0 n=0 notice_missing=0
  # Every module compiled into the binary on any target, or into a test of
  # the main module (those do not ship, but a developer builds them).
  while read -r path version dir; do
    n=$((n + 1))
    if [[ -z "${dir}" || ! -d "${dir}" ]]; then
      echo "FAIL ${path}@${version}: not in the module cache (run go mod download)"
      bad=1
      continue
    fi
    files=$(license_files "${dir}")
    if [[ -z "${files}" ]]; then
      echo "FAIL ${path}@${version}: no LICENSE or COPYING file"
      bad=1
      continue
    fi
    lic=""
    for f in ${files}; do
      for l in $(identify "${f}"); do
        if [[ "${allowed}" != *" ${l} "* ]]; then
          echo "FAIL ${path}@${version}: $(basename "${f}") is ${l}, not in the allowed list:${allowed}"
          bad=1
        fi
        [[ " ${lic} " == *" ${l} "* ]] || lic="${lic:+${lic} }${l}"
      done
    done
    printf '%-55s %-38s %s\n' "${path}" "${version}" "${lic}"
  done < <({ shipped; modules -test ./...; } | sort -u)

  # Apache-2.0 section 4(d): the NOTICE of a bundled component travels with it.
  while read -r path version dir; do
    if [[ -n "$(find "${dir}" -maxdepth 1 -type f -iname 'NOTICE*')" ]] && ! grep -qF -- "${path}" NOTICE; then
      echo "FAIL ${path}@${version} ships a NOTICE file and is linked into the binary: add its attribution to NOTICE"
      notice_missing=1
    fi
  done < <(shipped)

  if ((bad || notice_missing)); then
    exit 1
  fi
  echo "${n} modules, all under licenses compatible with Apache-2.0 (${allowed# }); NOTICE covers every bundled NOTICE"
}

third_party() {
  local out=$1 path version dir f goroot
  goroot=$(go env GOROOT)
  mkdir -p "$(dirname "${out}")"
  {
    echo "Third-party software in deployment_service_exporter"
    echo
    echo "The binary is built with Go and links the Go modules below. Each is"
    echo "listed with the text of its license files (and NOTICE, if any),"
    echo "as found in its source."
    echo
    echo "================================================================"
    echo "Go standard library and runtime ($(go env GOVERSION))"
    echo "https://go.dev"
    echo "================================================================"
    cat "${goroot}/LICENSE"
    [[ -f "${goroot}/PATENTS" ]] && { echo; cat "${goroot}/PATENTS"; }
    while read -r path version dir; do
      echo
      echo "================================================================"
      echo "${path} ${version}"
      echo "================================================================"
      for f in $(license_files "${dir}") $(find "${dir}" -maxdepth 1 -type f -iname 'NOTICE*' | sort); do
        echo "--- $(basename "${f}")"
        cat "${f}"
        echo
      done
    done < <(shipped)
  } >"${out}"
  echo "wrote ${out}" >&2
}

case "${1:-check}" in
check) check ;;
third-party)
  [[ $# -eq 2 ]] || { echo "usage: $0 third-party FILE" >&2; exit 2; }
  third_party "$2"
  ;;
*)
  echo "usage: $0 [check | third-party FILE]" >&2
  exit 2
  ;;
esac
