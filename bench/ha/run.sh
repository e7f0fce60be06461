#!/usr/bin/env bash
# Runs the controllers failover benchmark. Usage: bench/ha/run.sh [-runs 10]
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-ha ./bench/ha
exec bin/bench-ha -portal bin/portal "$@"
