#!/usr/bin/env bash
# DNS benchmark: `portal dns` against Knot DNS (authoritative, the speed
# limit) and CoreDNS (file plugin), with the anchors' scripts from
# ../shared/anchors: the same zone contents (1,000 Services
# sN.default.svc.cluster.local), each server pinned to core 0, dnsperf
# pinned to core 1, in A/B/A order (knot, portal, coredns, knot, portal,
# coredns, knot). Then Portal alone at a fixed rate of half its peak for
# p99, and a scale run: 10,000 headless Services with 10 endpoints each
# (100,000 endpoints), RSS of `portal dns`.
#
# Usage: COREDNS=/path/to/coredns bench/dns/run.sh [all|perf|scale]
# Needs dnsperf, knotd, dig, curl, taskset (Debian: dnsperf knot bind9-dnsutils).
# Env: ROUNDS (2), DUR (15), LAT_DUR (10), QUIET_MAX (30), ANCHORS.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
mode=${1:-all}
: "${ANCHORS:=$repo/../shared/anchors}" "${ROUNDS:=2}" "${QUIET_MAX:=30}"
export QUIET_MAX
export LOGDIR=${LOGDIR:-$(mktemp -d /tmp/portal-bench-dns-logs.XXXX)}
. "$ANCHORS/lib.sh"
for tool in dnsperf knotd dig curl taskset; do
  command -v "$tool" >/dev/null || { echo "bench/dns: $tool not found (apt-get install -y dnsperf knot bind9-dnsutils curl)" >&2; exit 1; }
done

./hack/build.sh
go build -o bin/bench-dns ./bench/dns
work=$(mktemp -d /tmp/portal-bench-dns.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do stop_pid "$p"; done; rm -rf "$work"; }
trap cleanup EXIT
log "logs in $LOGDIR"

# start_api DIR PORT: `portal apiserver` (embedded etcd) on the client core;
# it is idle while dnsperf runs.
start_api() {
  taskset -c "$CLIENT_CORE" bin/portal apiserver --data-dir "$1" --secure-port "$2" > "$LOGDIR/apiserver-$2.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do
    if [ -f "$1/admin.kubeconfig" ] && curl -sk "https://127.0.0.1:$2/readyz" 2>/dev/null | grep -q '^ok$'; then return 0; fi
    sleep 0.2
  done
  log "apiserver did not start"; tail -20 "$LOGDIR/apiserver-$2.log" >&2; exit 1
}

rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
# rss_parts PID: anonymous memory (the heap: what DNS holds) and file-backed
# pages (the portal binary's code touched at start).
rss_parts() { awk '/RssAnon|RssFile/{printf "%s %s kB ", $1, $2}' "/proc/$1/status"; }
median() { sort -n | awk '{a[NR]=$1} END{if(NR==0){print 0; exit} print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }

portal_cmd() { # portal_cmd KUBECONFIG PORT: the `portal dns` command line
  echo bin/portal dns --kubeconfig "$1" --dns-port "$2" --upstream none \
    --health-bind-address "127.0.0.1:$(( $2 + 10000 ))" --metrics-bind-address "127.0.0.1:$(( $2 + 10001 ))" \
    --ready-bind-address "127.0.0.1:$(( $2 + 10010 ))"
}

perf() {
  : "${COREDNS:?set COREDNS=/path/to/a/coredns/binary (built outside this repository)}"
  local zone=$work/zone results=$work/results.txt
  "$ANCHORS/dns_gen.sh" "$zone" 1000
  start_api "$work/api" 26443
  local kc=$work/api/admin.kubeconfig
  taskset -c "$CLIENT_CORE" bin/bench-dns -kubeconfig "$kc" -services 1000 >&2
  : > "$results"
  for round in $(seq 1 "$ROUNDS"); do
    log "round $round: knot, portal, coredns"
    "$ANCHORS/dns_knot.sh" "$zone" 5301 2>&1 | tee -a "$results"
    # shellcheck disable=SC2046
    "$ANCHORS/dns_server_bench.sh" portal 5399 "$zone" -- $(portal_cmd "$kc" 5399) 2>&1 | tee -a "$results"
    "$ANCHORS/dns_coredns.sh" "$zone" 5302 2>&1 | tee -a "$results"
  done
  log "closing anchor run: knot"
  "$ANCHORS/dns_knot.sh" "$zone" 5301 2>&1 | tee -a "$results"

  local p_q p_nx k_q k_nx c_q c_nx half
  sat() { grep "^RESULT $1-$2 sat" "$results" | sed 's/.*qps=\([0-9.]*\).*/\1/' | median; }
  p_q=$(sat portal queries); p_nx=$(sat portal queries-nx10)
  k_q=$(sat knot queries); k_nx=$(sat knot queries-nx10)
  c_q=$(sat coredns queries); c_nx=$(sat coredns queries-nx10)
  half=$(awk -v q="$p_q" 'BEGIN{printf "%d", q/2}')
  log "portal at half its peak: $half QPS"
  # shellcheck disable=SC2046
  DUR=5 LAT_QPS=$half "$ANCHORS/dns_server_bench.sh" portal-half 5399 "$zone" -- $(portal_cmd "$kc" 5399) 2>&1 | tee -a "$results"
  DUR=5 LAT_QPS=$half "$ANCHORS/dns_knot.sh" "$zone" 5301 2>&1 | sed 's/RESULT knot-/RESULT knot-half-/' | tee -a "$results"

  echo "== DNS summary (medians of $ROUNDS rounds; knot has $((ROUNDS + 1))) =="
  printf 'SUMMARY sat_qps queries:      portal=%.0f coredns=%.0f knot=%.0f  portal/coredns=%.2f portal/knot=%.2f\n' \
    "$p_q" "$c_q" "$k_q" "$(awk -v a="$p_q" -v b="$c_q" 'BEGIN{print a/b}')" "$(awk -v a="$p_q" -v b="$k_q" 'BEGIN{print a/b}')"
  printf 'SUMMARY sat_qps queries-nx10: portal=%.0f coredns=%.0f knot=%.0f  portal/coredns=%.2f portal/knot=%.2f\n' \
    "$p_nx" "$c_nx" "$k_nx" "$(awk -v a="$p_nx" -v b="$c_nx" 'BEGIN{print a/b}')" "$(awk -v a="$p_nx" -v b="$k_nx" 'BEGIN{print a/b}')"
  grep -E "^RESULT (portal|knot|coredns)-(half-)?queries(-nx10)? lat@" "$results" | sed 's/^/SUMMARY /'
  grep -E "RESULT portal-half-queries.* lat@" "$results" | sed 's/.*p99_ms=\([0-9.]*\).*/SUMMARY portal p99 at half peak (queries): \1 ms/'
  grep -E "rss_kb after load" "$results" | sed 's/^.*\] /SUMMARY /'
}

scale() {
  local kc port=5398 pid n=${SCALE_SERVICES:-10000} m=${SCALE_ENDPOINTS:-10}
  start_api "$work/scale-api" 26444
  kc=$work/scale-api/admin.kubeconfig
  # shellcheck disable=SC2046
  taskset -c "$SERVER_CORE" $(portal_cmd "$kc" $port) > "$LOGDIR/portal-scale.log" 2>&1 &
  pid=$!; pids+=("$pid")
  wait_ready() { for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$((port + 10000))/ready" >/dev/null && return 0; sleep 0.2; done; return 1; }
  wait_ready || { log "portal dns not ready"; exit 1; }
  echo "SUMMARY scale: portal dns RSS with an empty cluster: $(rss_kb "$pid") kB ($(rss_parts "$pid"))"
  log "filling $n headless Services x $m endpoints while portal dns watches"
  taskset -c "$CLIENT_CORE" bin/bench-dns -kubeconfig "$kc" -services "$n" -endpoints-per-service "$m" >&2
  local last="h$((n - 1)).scale.svc.cluster.local"
  for _ in $(seq 1 600); do [ "$(dig +short @127.0.0.1 -p $port "$last" | wc -l)" = "$m" ] && break; sleep 0.5; done
  echo "SUMMARY scale: $last has $(dig +short @127.0.0.1 -p $port "$last" | wc -l) A records; pod-3.h42: $(dig +short @127.0.0.1 -p $port pod-3.h42.scale.svc.cluster.local)"
  echo "SUMMARY scale: RSS after $n services / $((n * m)) endpoints arrived as events: $(rss_kb "$pid") kB ($(rss_parts "$pid"))"
  stop_pid "$pid"
  # shellcheck disable=SC2046
  taskset -c "$SERVER_CORE" $(portal_cmd "$kc" $port) > "$LOGDIR/portal-scale2.log" 2>&1 &
  pid=$!; pids+=("$pid")
  local t0; t0=$(now_ns)
  wait_ready || { log "portal dns not ready"; exit 1; }
  echo "SUMMARY scale: fresh start: ready in $(( ($(now_ns) - t0) / 1000000 )) ms, RSS $(rss_kb "$pid") kB ($(rss_parts "$pid"))"
  curl -s "http://127.0.0.1:$((port + 10001))/metrics" | grep -E '^go_memstats_(heap_inuse|heap_alloc)_bytes ' | sed 's/^/SUMMARY scale: /'
  seq 0 $((n - 1)) | shuf --random-source=<(yes) | awk '{print "h"$1".scale.svc.cluster.local A"}' > "$work/scale-queries.txt"
  "$ANCHORS/dns_bench.sh" portal-scale $port "$pid" "$work/scale-queries.txt" 2>&1 | tee "$work/scale-results.txt"
  echo "SUMMARY scale: RSS after load: $(rss_kb "$pid") kB ($(rss_parts "$pid"))"
}

case $mode in
  all) perf; scale ;;
  perf) perf ;;
  scale) scale ;;
  *) echo "usage: $0 [all|perf|scale]" >&2; exit 2 ;;
esac
