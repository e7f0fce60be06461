#!/usr/bin/env bash
# Port-forward benchmark: builds portal and runs bench/portforward in a
# node network namespace it creates (API server, agent, one pod serving a
# file); everything is removed at the end.
# Usage (root): bench/portforward/run.sh [-size 200] [-rounds 5] [-spdy] [-portal BINARY]
# -portal runs another build's server and agent (the last -portal given
# wins over this tree's bin/portal), to compare two builds in turn.
set -euo pipefail
cd "$(dirname "$0")/../.."
./hack/build.sh
go build -o bin/bench-portforward ./bench/portforward
dir=$(mktemp -d /tmp/portal-bench-pf-XXXXXX)
n1=portal-bench-pf-$$
ip netns add "$n1"
cleanup() {
	set +e # clean up all, whatever fails
	grep -rhoE '"(sandboxPid|pid)": ?[0-9]+' "$dir" 2>/dev/null | grep -oE '[0-9]+$' | while read -r pid; do
		[ "$pid" -gt 1 ] && kill -9 -- "-$pid" 2>/dev/null || true
	done
	ip netns pids "$n1" 2>/dev/null | xargs -r kill -9 || true
	ip netns del "$n1" 2>/dev/null || true
	[ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
PORTAL_BENCH_NETNS=$n1 ip netns exec "$n1" "$PWD/bin/bench-portforward" -portal "$PWD/bin/portal" -dir "$dir" "$@"
