#!/usr/bin/env bash
# Verifies that apiserver/openapi/zz_generated.openapi.go and
# apiserver/openapi/violations.report are up to date: runs the exact
# //go:generate command from apiserver/openapi/doc.go with its outputs
# redirected into a temporary directory, then diffs. The tree is not modified.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PKG_DIR="${REPO_ROOT}/apiserver/openapi"

GOPROXY="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)"
export GOPROXY

TMP_DIR="$(mktemp -d)"
trap 'rm -rf "${TMP_DIR}"' EXIT

directive="$(grep -m1 '^//go:generate ' "${PKG_DIR}/doc.go" | sed 's#^//go:generate ##')"
if [[ -z "${directive}" ]]; then
  echo "no //go:generate directive found in ${PKG_DIR}/doc.go" >&2
  exit 1
fi
read -r -a words <<<"${directive}"

# The generator version in the directive must match the kube-openapi pinned in go.mod.
pinned="$(cd "${REPO_ROOT}" && go list -m -f '{{.Version}}' k8s.io/kube-openapi)"
if [[ "${directive}" != *"openapi-gen@${pinned} "* ]]; then
  echo "//go:generate in apiserver/openapi/doc.go does not use openapi-gen@${pinned} (go.mod's k8s.io/kube-openapi)" >&2
  exit 1
fi

# Redirect the output directory and the violation report into TMP_DIR.
cmd=()
output_file="zz_generated.openapi.go"
report_file=""
for ((i = 0; i < ${#words[@]}; i++)); do
  w="${words[i]}"
  case "${w}" in
    --output-dir)
      cmd+=("${w}" "${TMP_DIR}")
      i=$((i + 1))
      ;;
    --output-file)
      output_file="${words[i + 1]}"
      cmd+=("${w}" "${output_file}")
      i=$((i + 1))
      ;;
    --report-filename)
      report_file="${words[i + 1]}"
      cmd+=("${w}" "${TMP_DIR}/${report_file}")
      i=$((i + 1))
      ;;
    *)
      cmd+=("${w}")
      ;;
  esac
done

# go generate runs directives in the package directory; do the same so the
# input packages resolve against this module's go.mod.
(cd "${PKG_DIR}" && "${cmd[@]}")

rc=0
diff -u "${PKG_DIR}/${output_file}" "${TMP_DIR}/${output_file}" || rc=1
if [[ -n "${report_file}" ]]; then
  diff -u "${PKG_DIR}/${report_file}" "${TMP_DIR}/${report_file}" || rc=1
fi
if [[ ${rc} -ne 0 ]]; then
  echo "apiserver/openapi is out of date; run hack/update-openapi.sh" >&2
  exit 1
fi
echo "apiserver/openapi is up to date"
