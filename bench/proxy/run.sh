#!/usr/bin/env bash
# Proxy benchmark: builds portal, installs nginx, wrk and curl if missing,
# and runs bench/proxy inside a fresh network namespace (removed at the end).
# Usage (root): bench/proxy/run.sh [-mode nftables|iptables] [-services 10000] [-endpoints 10] [-throughput=false] [-rounds 5]
set -euo pipefail
cd "$(dirname "$0")/../.."
need=()
command -v nginx >/dev/null || need+=(nginx-light)
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
if ((${#need[@]})); then apt-get install -y -qq "${need[@]}" >/dev/null; fi
./hack/build.sh
go build -o bin/bench-proxy ./bench/proxy
ns=portal-bench-$$
ip netns add "$ns"
trap 'ip netns pids "$ns" | xargs -r kill -9; ip netns del "$ns"' EXIT
PORTAL_BENCH_NETNS=$ns ip netns exec "$ns" taskset -c 1 bin/bench-proxy -portal bin/portal "$@"
