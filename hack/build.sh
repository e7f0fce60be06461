#!/usr/bin/env bash
# Builds the portal binary: hack/build.sh [OUTPUT] (default bin/portal).
# Every script and the end-to-end tests build through here, so the binary
# they run is the one users get.
#
# kustomize_disable_go_plugin_support: kubectl's kustomize can load Go
# plugins, and linking the standard library's plugin package makes the Go
# linker keep and export every symbol of the program, which makes the binary
# much larger and every Portal process map more of it. Upstream kubectl is
# built without cgo, where Go plugins do not load either.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go build -tags kustomize_disable_go_plugin_support -o "${1:-bin/portal}" ./cmd/portal
