#!/usr/bin/env bash
# Installs what Portal and its tests need on Debian: the kernel tools the
# data-plane tests drive and dig; with --test, also Chromium for the
# browser test. Skips what is already there; needs root
# (or sudo) only when something is missing.
set -euo pipefail

need=()
command -v nft >/dev/null || need+=(nftables)
command -v iptables >/dev/null || need+=(iptables)
command -v dig >/dev/null || need+=(dnsutils)
command -v conntrack >/dev/null || need+=(conntrack)
command -v ip >/dev/null || need+=(iproute2)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)       # pods in the end-to-end tests run python3 -m http.server
command -v unshare >/dev/null || need+=(util-linux)
command -v modprobe >/dev/null || need+=(kmod)        # the agent loads br_netfilter where it is a module
if [[ ${1:-} == --test ]]; then
	command -v chromium >/dev/null || need+=(chromium) # the browser test of the service map (e2e/ui_test.go)
fi

if ((${#need[@]})); then
	sudo=""
	[[ $(id -u) -eq 0 ]] || sudo="sudo"
	echo "installing: ${need[*]}" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

cd "$(dirname "$0")/.."
go mod download
