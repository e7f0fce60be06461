#!/usr/bin/env bash
# Runs the load-and-memory benchmark: portal server in a fresh data directory,
# 200 ConfigMap watches and 50 clients for 60 s, then 150 s of samples.
# Usage: bench/apiload/run.sh [-watch-scope all|namespace] [-heap-profile PREFIX] [-cpu-profile F]
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-apiload ./bench/apiload
exec bin/bench-apiload -portal bin/portal "$@"
