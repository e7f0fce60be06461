#!/usr/bin/env bash
# Runs the workload benchmark: portal server on core 0, the bench (load and
# simulated node agents) on core 1.
# Usage: bench/workloads/run.sh [-replicas 1000] [-rollouts 3] [-cpuprofile F]
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-workloads ./bench/workloads
exec taskset -c 1 bin/bench-workloads -portal bin/portal -server-core 0 "$@"
