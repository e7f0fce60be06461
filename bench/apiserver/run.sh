#!/usr/bin/env bash
# Runs the API benchmark: portal apiserver on core 0, the load on core 1.
# Usage: bench/apiserver/run.sh [-duration 10s] [-services 10000]
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-apiserver ./bench/apiserver
exec taskset -c 1 bin/bench-apiserver -portal bin/portal -server-core 0 "$@"
