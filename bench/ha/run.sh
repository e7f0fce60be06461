#!/usr/bin/env bash
# Runs the HA benchmark: etcd leader failover (writes unavailable, p50/max
# over -runs kills) and Service create throughput with three etcd members
# against one. Needs root (network namespaces). Usage:
# bench/ha/run.sh [-runs 10] [-writers 6] [-creates 2000] [-clients 8]
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-ha ./bench/ha
exec bin/bench-ha -portal bin/portal "$@"
