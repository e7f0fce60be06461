#!/usr/bin/env bash
# Regenerates apiserver/openapi/zz_generated.openapi.go (and
# apiserver/openapi/violations.report) with k8s.io/kube-openapi's openapi-gen
# at the version pinned in go.mod. The generator command itself lives in the
# //go:generate directive in apiserver/openapi/doc.go.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${REPO_ROOT}"

# Prefer the local module cache so generation works offline once the generator
# has been built before; fall back to the configured proxy for anything missing.
GOPROXY="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)"
export GOPROXY

go generate ./apiserver/openapi/
