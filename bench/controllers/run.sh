#!/usr/bin/env bash
# Runs the controller benchmark: server and controller-manager on core 0,
# the load on core 1. Usage: bench/controllers/run.sh [-services 1000] [-pods-per-service 10]
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-controllers ./bench/controllers
exec taskset -c 1 bin/bench-controllers -portal bin/portal -server-core 0 "$@"
