#!/usr/bin/env bash
# Runs the explain benchmark: the server on core 0, the load and explain on
# core 1. Usage: bench/explain/run.sh [-services 1000] [-pods-per-service 10] [-runs 20]
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-explain ./bench/explain
exec taskset -c 1 bin/bench-explain -portal bin/portal -server-core 0 "$@"
