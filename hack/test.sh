#!/usr/bin/env bash
# Runs every check CI runs: formatting, no committed temporary files, vet,
# and all tests (unit and end-to-end; the end-to-end ones build and start
# the real binary).
set -euo pipefail
cd "$(dirname "$0")/.."
./hack/deps.sh --test

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))
if [[ -n $unformatted ]]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
./hack/verify-no-temp-files.sh
go vet ./...
./hack/verify-openapi.sh
# Unit packages run under the race detector; the end-to-end packages run
# without it, since they spend their time in the real binary and the kernel.
# The unit tests that need root run in the host's network namespace; like
# the end-to-end tests (e2e/main_test.go), they must leave none of
# Portal's tables or links behind.
host_state() {
	{ nft list tables 2>/dev/null; ip -br link 2>/dev/null | awk '{print "link", $1}'; } | grep portal | sort || true
}
before=$(host_state)
go test -race -count=1 -timeout 20m $(go list ./... | grep -v '/e2e') "$@"
after=$(host_state)
if [[ $before != "$after" ]]; then
	printf 'the unit tests left Portal state in the host namespace:\nbefore: %s\nafter:  %s\n' "$before" "$after" >&2
	exit 1
fi
go test -count=1 -timeout 40m $(go list ./... | grep '/e2e') "$@"
