#!/usr/bin/env bash
# Runs the service-map benchmark: the server on core 0, Chromium and the
# bench on core 1. Usage: bench/ui/run.sh [-services 1000] [-pods-per-service 10]
# [-portal-b OTHER-BINARY -runs 3 -data-dir DIR] (see bench/README.md)
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-ui ./bench/ui
exec taskset -c 1 bin/bench-ui -portal bin/portal -server-core 0 "$@"
