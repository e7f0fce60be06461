#!/usr/bin/env bash
# Agent benchmark: builds portal and runs bench/agent on two node network
# namespaces it creates (node1 runs the API server, both run `portal agent`
# and `portal proxy --proxy-mode nftables`); everything is removed at the end.
# Usage (root): bench/agent/run.sh [-start-pods 30] [-pods 100] [-flips 40]
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v nft >/dev/null || { echo "bench/agent: needs nft (Debian nftables)" >&2; exit 2; }
./hack/build.sh
go build -o bin/bench-agent ./bench/agent
dir=$(mktemp -d /tmp/portal-bench-agent-XXXXXX)
n1=portal-bench-n1-$$
n2=portal-bench-n2-$$
ip netns add "$n1"
ip netns add "$n2"
cleanup() {
	set +e # clean up all, whatever fails
	# Pod processes live in namespaces of their own: kill them by the PIDs
	# the agents' state files list (the bench does too; this is for ^C).
	grep -rhoE '"(sandboxPid|pid)": ?[0-9]+' "$dir" 2>/dev/null | grep -oE '[0-9]+$' | while read -r pid; do
		[ "$pid" -gt 1 ] && kill -9 -- "-$pid" 2>/dev/null || true
	done
	for ns in "$n1" "$n2"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 || true
		ip netns del "$ns" 2>/dev/null || true
	done
	[ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
PORTAL_BENCH_NETNS=$n1 PORTAL_BENCH_NETNS2=$n2 ip netns exec "$n1" bin/bench-agent -portal bin/portal -dir "$dir" "$@"
