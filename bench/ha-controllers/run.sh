#!/usr/bin/env bash
# Runs the controllers failover benchmark. Usage: bench/ha-controllers/run.sh [-runs 10]
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-ha-controllers ./bench/ha-controllers
exec bin/bench-ha-controllers -portal bin/portal "$@"
