#!/usr/bin/env bash
# Checks the systemd unit README.md installs (packaging/portal.service)
# with `systemd-analyze verify`: a directive systemd does not know or
# cannot parse fails the check, where systemd only warns and goes on.
# Skips, saying so, where systemd-analyze is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
unit=packaging/portal.service

# README.md copies the binary to /usr/local/bin; the unit must run it there.
if ! grep -qx 'ExecStart=/usr/local/bin/portal server' "$unit"; then
	echo "$unit: want ExecStart=/usr/local/bin/portal server, where README.md installs the binary" >&2
	exit 1
fi
if ! command -v systemd-analyze >/dev/null; then
	echo "SKIP: systemd-analyze not found; $unit not verified"
	exit 0
fi

# verify refuses an ExecStart binary that is not there: a stub stands in
# for /usr/local/bin/portal, so the check needs no installed Portal.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\n' >"$tmp/portal"
chmod +x "$tmp/portal"
sed "s|/usr/local/bin/portal|$tmp/portal|" "$unit" >"$tmp/portal.service"
status=0
out=$(systemd-analyze verify "$tmp/portal.service" 2>&1) || status=$?
# Only lines about this unit count: a machine's own units may warn too.
ours=$(grep -F "portal.service" <<<"$out" || true)
if [[ $status -ne 0 || -n $ours ]]; then
	echo "$unit: systemd-analyze verify:" >&2
	echo "${ours:-$out}" | sed "s|$tmp/|packaging/|g" >&2
	exit 1
fi
echo "$unit: systemd-analyze verify ok"
