#!/usr/bin/env bash
# Ingress benchmark (issue #18, Speed): Portal's ingress against nginx, HAProxy (http mode)
# and Caddy as reverse proxies to the same backend, then the change latency and RSS at scale.
# Usage (root): bench/ingress/run.sh [all|throughput|scale]     (all: about 15 minutes)
# Env: ANCHORS (the anchor scripts; default ../shared/anchors or /work/shared/anchors),
#      ROUNDS (2), DUR (wrk seconds, 10), LAT_DUR (latency seconds, 10), LAT_RATE (default:
#      half of Portal's median keep-alive req/s), QUIET_MAX (s to wait for quiet cores, 10),
#      ORDER ("nginx caddy haproxy portal"; "base" is PORTAL_BASE, another portal binary, for a
#      before/after comparison in one run; "floor" and "floorparse" are the Go floors of
#      floor.go, plain HTTP only), PROFILE=F (a CPU profile of Portal under the
#      keep-alive load: Go's, from `portal ingress --profiling`, to F; perf's when F ends in
#      .perf), SYSCALLS=1 (task clock, system calls by name and context switches per request
#      of each proxy, from perf stat), LOADS (of "keepalive close tls-close 1MiB", all by default),
#      SCALE_ARGS (flags of bench-ingress scale), KEEP=1.
#
# Layout (the anchors' own, as bench/proxy/userspace.sh): a network namespace with only lo;
# the backend nginx (1 worker, static files) on core 1 with the client (wrk, the latency
# client); the proxy under test alone on core 0. Each proxy serves HTTP on 127.0.0.1:18080 and
# HTTPS on 127.0.0.1:18443 (one ECDSA P-256 certificate, no SNI: the default certificate) and
# forwards to 10.244.0.10:8080 with upstream keep-alive. Rounds run the proxies in ORDER,
# then in reverse, and so on (n c h p p h c n ...), so every anchor brackets Portal.
#
# Portal needs an API server: `portal apiserver` runs in the namespace on core 1 (idle during
# the runs) with an IngressClass, a selector-less Service whose EndpointSlice points at the
# backend, a TLS Secret and one Ingress, written by bench-ingress; `portal ingress` is the
# proxy under test.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
what=${1:-all}
if [ -z "${ANCHORS:-}" ]; then
  for d in "$repo/../shared/anchors" /work/shared/anchors; do [ -d "$d" ] && ANCHORS=$(cd "$d" && pwd) && break; done
fi
[ -x "$ANCHORS/l4_backend.sh" ] || { echo "set ANCHORS to the anchor scripts" >&2; exit 2; }

# The anchors and the clients, from Debian. The packages' own services are not wanted: the
# runs start each server with a configuration of their own.
need=()
command -v nginx >/dev/null || need+=(nginx-light)
command -v haproxy >/dev/null || need+=(haproxy)
command -v caddy >/dev/null || need+=(caddy)
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
if ((${#need[@]})); then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  for s in nginx haproxy caddy; do
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then systemctl disable --now "$s" >/dev/null 2>&1 || true
    else service "$s" stop >/dev/null 2>&1 || true; fi
  done
fi

./hack/build.sh
go build -o bin/bench-ingress ./bench/ingress
go build -o bin/bench-latency ./bench/proxy-userspace

export NS=portal-ing-$$ L4RUN=/tmp/portal-ing-$$
export LOGDIR=$L4RUN/logs QUIET_MAX=${QUIET_MAX:-10}
: "${DUR:=10}" "${LAT_DUR:=10}" "${ROUNDS:=2}" "${ORDER:=nginx caddy haproxy portal}"
backend_ip=10.244.0.10 backend2_ip=10.244.0.11 api_port=16443 http_port=18080 https_port=18443
. "$ANCHORS/lib.sh"
inns() { nsenter --net="/run/netns/$NS" "$@"; }
api_pid= proxy_pid=
cleanup() {
  [ -n "$proxy_pid" ] && stop_pid "$proxy_pid"
  [ -n "$api_pid" ] && stop_pid "$api_pid"
  "$ANCHORS/l4_backend.sh" stop || true
  if [ -n "${KEEP:-}" ]; then echo "# logs in $LOGDIR" >&2; else rm -rf "$L4RUN"; fi
}
trap cleanup EXIT

echo "# $(date -u +%FT%TZ) $(uname -r) nproc=$(nproc) $(git -C "$repo" rev-parse --short HEAD)"
echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), haproxy $(haproxy -v | awk 'NR==1{print $3}'), caddy $(caddy version | awk '{print $1}'), wrk $(wrk -v 2>&1 | awk 'NR==1{print $2}')"
"$ANCHORS/l4_backend.sh" start
# The backend also listens on addresses an EndpointSlice may hold (not loopback); /who
# answers with the address it was reached on, so that the scale run sees which endpoint
# served a request.
inns ip addr add "$backend_ip/32" dev lo
inns ip addr add "$backend2_ip/32" dev lo
sed -i "s|listen 127.0.0.1:8080 backlog=4096;|& listen $backend_ip:8080 backlog=4096; listen $backend2_ip:8080 backlog=4096; location ~ /who\$ { return 200 \"\$server_addr\\\\n\"; }|" "$L4RUN/nginx/nginx.conf"
head -c 1048576 /dev/urandom > "$L4RUN/www/1m.bin"
inns nginx -p "$L4RUN/nginx" -c "$L4RUN/nginx/nginx.conf" -s reload
inns bash -c "$(declare -f wait_tcp); wait_tcp $backend_ip 8080 100; wait_tcp $backend2_ip 8080 100"
chmod 0755 "$L4RUN"

# One certificate for every proxy.
mkdir -p "$L4RUN/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=bench.local \
  -addext subjectAltName=DNS:bench.local,DNS:*.bench.local,IP:127.0.0.1 \
  -keyout "$L4RUN/tls/key.pem" -out "$L4RUN/tls/cert.pem" 2>/dev/null
cat "$L4RUN/tls/cert.pem" "$L4RUN/tls/key.pem" > "$L4RUN/tls/both.pem"

# The API server, on the client's core.
mkdir -p "$L4RUN/api" "$L4RUN/kc"
nsenter --net="/run/netns/$NS" taskset -c "$CLIENT_CORE" bin/portal apiserver --data-dir "$L4RUN/api" \
  --secure-port $api_port --advertise-address $backend_ip > "$LOGDIR/apiserver.log" 2>&1 &
api_pid=$!
for _ in $(seq 1 300); do inns curl -skf "https://127.0.0.1:$api_port/readyz" >/dev/null && break; sleep 0.3; done
inns curl -skf "https://127.0.0.1:$api_port/readyz" >/dev/null || { tail -20 "$LOGDIR/apiserver.log"; exit 1; }
install -m 0644 "$L4RUN/api/admin.kubeconfig" "$L4RUN/kc/kubeconfig"
kc=$L4RUN/kc/kubeconfig
inns bin/bench-ingress setup -kubeconfig "$kc" -backend "$backend_ip:8080" -cert "$L4RUN/tls/cert.pem" -key "$L4RUN/tls/key.pem"

portal_args=(--kubeconfig "$kc" --http-port $http_port --https-port $https_port
  --default-ssl-certificate default/bench-tls --metrics-bind-address 127.0.0.1:10354
  --access-log=false) # the anchors' configurations log nothing either
# A profile is Go's, from --profiling's /debug/pprof, unless PROFILE names a perf file (*.perf).
case ${PROFILE:-} in "" | *.perf) ;; *) portal_args+=(--profiling) ;; esac
portal_cmd=("$repo/bin/portal" ingress "${portal_args[@]}")
. "$repo/bench/ingress/proxies.sh"

results=$L4RUN/results.txt
run() { "$@" | tee -a "$results"; }
# lat NAME PORT: the open-loop latency client at $rate over 64 keep-alive connections.
rate=0
lat() { inns nice -n "$NICE" taskset -c "$CLIENT_CORE" bin/bench-latency -name "$1" -addr "127.0.0.1:$2" \
  -rate "$rate" -duration "${LAT_DUR}s" | tee -a "$results"; }

# proxy_cpu PID: utime and stime (ticks) of PID and its children (nginx's worker).
proxy_cpu() { local p; for p in "$1" $(pgrep -P "$1" || true); do cat "/proc/$p/stat" 2>/dev/null; done |
  awk '{sub(/.*\) /, ""); u+=$12; s+=$13} END{print u+0, s+0}'; }

# proxy_rss PID: VmRSS (MiB) of PID and its children (nginx's worker).
proxy_rss() { local p; for p in "$1" $(pgrep -P "$1" || true); do cat "/proc/$p/status"; done |
  awk '/^VmRSS/{s+=$2} END{printf "%.0f", s/1024}'; }

# load NAME PID LABEL URL CONNS [wrk args...]: one wrk run on the client core; prints
# RESULT ingress NAME LABEL rps=.. p50=.. p99=.. mbps=.. us_per_req=.. proxy_cpu_pct=..
# user_us=.. sys_us=.. (us_per_req in user space and in the kernel) cores [errors].
load() {
  local name=$1 pid=$2 label=$3 url=$4 conns=$5; shift 5
  local f="$LOGDIR/wrk-$name-$label-$(date +%s%N).txt" c0 c1 t0 t1 s0 s1 u0 u1 k0 k1
  wait_quiet; read -r u0 k0 < <(proxy_cpu "$pid"); t0=$(now_ns); s0=$(core_snap)
  local sc=
  if [ -n "${SYSCALLS:-}" ] && command -v perf >/dev/null; then
    perf stat -x, -e "task-clock,raw_syscalls:sys_enter,context-switches,$syscall_events" \
      -p "$(echo "$pid" $(pgrep -P "$pid") | tr ' ' ,)" -o "$f.perf" &
    sc=$!
  fi
  inns nice -n "$NICE" taskset -c "$CLIENT_CORE" wrk -t1 -c"$conns" -d"${DUR}s" --latency "$@" "$url" > "$f" 2>&1 || true
  read -r u1 k1 < <(proxy_cpu "$pid"); t1=$(now_ns); s1=$(core_snap)
  c0=$((u0 + k0)) c1=$((u1 + k1))
  if [ -n "$sc" ]; then
    kill -INT "$sc"; wait "$sc" || true
    awk -F, -v n="$name" -v l="$label" -v reqs="$(awk '/ requests in /{print $1}' "$f")" '
      /raw_syscalls:sys_enter/{sys=$1} /context-switches/{cs=$1} /task-clock/{ms=$1}
      /syscalls:sys_enter_/{ if ($1 > 0) { c=$3; sub("syscalls:sys_enter_","",c); by[c]=$1 } }
      END{ if (reqs == 0) exit
        printf "SYSCALLS %s %s per_req=%.2f context_switches_per_req=%.2f task_clock_us_per_req=%.1f", n, l, sys/reqs, cs/reqs, 1000*ms/reqs
        for (c in by) if (by[c]/reqs >= 0.01) printf " %s=%.2f", c, by[c]/reqs
        printf "\n" }' "$f.perf"
  fi
  awk -v n="$name" -v l="$label" -v cpu="$((c1 - c0))" -v ucpu="$((u1 - u0))" -v hz="$CLK_TCK" -v w="$(( (t1 - t0) / 1000000 ))" \
      -v cores="$(core_pct "$s0" "$s1")" -v size="${SIZE:-0}" '
    / requests in /{reqs=$1} /Requests\/sec/{rps=$2} /^ +50%/{p50=$2} /^ +99%/{p99=$2}
    /Socket errors/{sub(/^ +/,""); err=$0} /Non-2xx/{non2=$NF}
    END{ us = reqs ? 1e6*cpu/hz/reqs : 0; uus = reqs ? 1e6*ucpu/hz/reqs : 0
      printf "RESULT ingress %s %s rps=%s p50=%s p99=%s mbps=%.0f us_per_req=%.1f proxy_cpu_pct=%.1f user_us=%.1f sys_us=%.1f %s%s%s\n", n, l, rps, p50, p99,
        rps*size/1e6, us, 100*cpu/hz/(w/1000), uus, us-uus, cores, (err ? " [" err "]" : ""), (non2 ? " non2xx=" non2 : "") }' "$f"
}

# syscall_events: the system calls SYSCALLS counts by name, those the proxies make per request.
syscall_events=$(printf 'syscalls:sys_enter_%s,' read readv write writev recvfrom sendto sendmsg recvmsg \
  epoll_wait epoll_pwait epoll_ctl futex accept4 close connect getsockopt setsockopt shutdown \
  nanosleep tgkill getpid sched_yield splice sendfile64 openat newfstatat ioctl io_uring_enter)
syscall_events=${syscall_events%,}

# loads LOAD: whether LOADS (all four by default) has LOAD.
loads() { [[ " ${LOADS:-keepalive close tls-close 1MiB} " == *" $1 "* ]]; }

# bench_proxy NAME CMD...: starts the proxy on the server core, runs the four loads, stops it.
bench_proxy() {
  local name=$1; shift
  nsenter --net="/run/netns/$NS" bash -c 'ulimit -n $(ulimit -Hn); exec nice -n '"$NICE"' taskset -c '"$SERVER_CORE"' "$@"' _ "$@" \
    > "$LOGDIR/$name.log" 2>&1 &
  proxy_pid=$!
  if ! wait_served "$name"; then tail -20 "$LOGDIR/$name.log" >&2; stop_pid "$proxy_pid"; proxy_pid=; return 1; fi
  log "$name pid=$proxy_pid (threads $(ls /proc/$proxy_pid/task | wc -l))"
  if [ -n "${LAT_ONLY:-}" ]; then lat "$name" $http_port; stop_pid "$proxy_pid"; proxy_pid=; return 0; fi
  if loads keepalive; then
    run load "$name" "$proxy_pid" keepalive "http://127.0.0.1:$http_port/1k.bin" 64
    if [ "$name" = portal ] && [ -n "${PROFILE:-}" ] && [ ! -s "$PROFILE" ] && [ ! -s "$PROFILE.perf" ]; then profile_portal; fi
  fi
  if loads close; then run load "$name" "$proxy_pid" close "http://127.0.0.1:$http_port/1k.bin" 64 -H 'Connection: close'; fi
  if loads tls-close && [ -z "${HTTP_ONLY:-}" ]; then run load "$name" "$proxy_pid" tls-close "https://127.0.0.1:$https_port/1k.bin" 64 -H 'Connection: close'; fi
  if loads 1MiB; then SIZE=1048576 run load "$name" "$proxy_pid" 1MiB "http://127.0.0.1:$http_port/1m.bin" 8; fi
  echo "RESULT ingress $name rss_mib=$(proxy_rss "$proxy_pid")" | tee -a "$results"
  stop_pid "$proxy_pid"; proxy_pid=
}

# wait_served NAME: until the proxy answers 200 for /1k.bin on both ports (HTTP's alone when
# HTTP_ONLY is set).
wait_served() {
  local i
  for i in $(seq 1 300); do
    if inns curl -sf -o /dev/null "http://127.0.0.1:$http_port/1k.bin" &&
      { [ -n "${HTTP_ONLY:-}" ] || inns curl -skf -o /dev/null "https://127.0.0.1:$https_port/1k.bin"; }; then
      sleep 0.5; return 0; fi
    kill -0 "$proxy_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# profile_portal: a CPU profile of Portal's ingress during a second keep-alive load, from
# /debug/pprof on its metrics address (--profiling), or from perf when that does not answer.
profile_portal() {
  local secs=$((DUR > 4 ? DUR - 2 : DUR)) perfdata=$L4RUN/perf.data
  (
    sleep 2 # the load's wait for quiet cores (1 s at most), then wrk's start
    if ! inns curl -sf -o "$PROFILE" "http://127.0.0.1:10354/debug/pprof/profile?seconds=$secs"; then
      rm -f "$PROFILE"
      command -v perf >/dev/null && perf record -q -F 499 -g -p "$proxy_pid" -o "$perfdata" -- sleep "$secs" >/dev/null 2>&1 || true
    fi
  ) &
  local cp=$!
  QUIET_MAX=1 load portal "$proxy_pid" keepalive-profiled "http://127.0.0.1:$http_port/1k.bin" 64 >/dev/null
  wait "$cp" || true
  if [ -s "$PROFILE" ]; then
    go tool pprof -top -nodecount=40 "${portal_cmd[0]}" "$PROFILE" 2>/dev/null | sed 's/^/# pprof /' | head -50
  elif [ -s "$perfdata" ]; then
    perf report -i "$perfdata" --no-children --stdio --percent-limit 0.8 -g none 2>/dev/null | grep -v '^#' | grep . |
      head -50 | sed 's/^/# perf /'
    cp "$perfdata" "${PROFILE%.perf}.perf"
  fi
}

throughput() {
  log "core use before the runs: $(top -bn1 | sed -n 3p); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  local order=($ORDER) r i
  for r in $(seq 1 "$ROUNDS"); do
    if (( r % 2 == 0 )); then order=($(printf '%s\n' "${order[@]}" | tac)); fi
    for i in "${order[@]}"; do proxy_"$i"; done
    order=($ORDER)
  done
  latency
  summary
}

# latency: end to end at a fixed rate, half of Portal's median keep-alive peak, direct first
# and last; the added latency is each proxy's less direct's.
latency() {
  local peak
  peak=$(awk '$1=="RESULT" && $3=="portal" && $4=="keepalive"{sub("rps=","",$5); print $5}' "$results" | sort -g |
    awk '{a[NR]=$1} END{if (NR) print a[int((NR+1)/2)]}')
  rate=${LAT_RATE:-$(awk -v p="${peak:-0}" 'BEGIN{printf "%d", p/2}')}
  [ "$rate" -gt 0 ] || { log "no Portal peak: no latency run"; return 0; }
  lat direct 8080
  local p
  for p in $ORDER; do
    LAT_ONLY=1 proxy_"$p"
  done
  lat direct-b 8080
}

summary() {
  echo "# summary (medians over rounds; ratios of Portal to each anchor); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  awk '$1=="RESULT" && $2=="ingress" && $5 ~ /^rps=/ {
      n=$3; l=$4; v=$5; sub("rps=","",v); if (l=="1MiB") { v=$8; sub("mbps=","",v) }
      u=$9; sub("us_per_req=","",u); k=n" "l; vals[k]=vals[k]" "v; cpus[k]=cpus[k]" "u; names[n]=1; labels[l]=1
      if ($11 ~ /^user_us=/) { uu=$11; sub("user_us=","",uu); user[k]=user[k]" "uu } }
    function med(s,   a, m, i, j, t) { m=split(s, a, " "); for (i=1;i<=m;i++) for (j=i+1;j<=m;j++) if (a[j]+0<a[i]+0) {t=a[i];a[i]=a[j];a[j]=t}
      return m ? (m%2 ? a[(m+1)/2] : (a[m/2]+a[m/2+1])/2) : 0 }
    END { for (l in labels) for (n in names) { k=n" "l; if (!(k in vals)) continue
        printf "MEDIAN %s %s %s=%.0f us_per_req=%.1f user_us=%.1f runs=[%s ]\n", l, n, (l=="1MiB" ? "MBps" : "rps"), med(vals[k]), med(cpus[k]), med(user[k]), vals[k]
        m[k]=med(vals[k]) }
      for (l in labels) for (n in names) if (n != "portal" && (n" "l) in m && ("portal "l) in m && m[n" "l] > 0)
        printf "RATIO %s portal/%s=%.2fx\n", l, n, m["portal "l]/m[n" "l] }' "$results" | sort
  awk '$1=="RESULT" && $2=="latency"' "$results"
}

scale() {
  inns nice -n "$NICE" taskset -c "$CLIENT_CORE" bin/bench-ingress scale -kubeconfig "$kc" -ingress-cmd "${portal_cmd[0]} ${portal_cmd[1]}" \
    -core "$SERVER_CORE" -backend "$backend_ip:8080" -backend2 "$backend2_ip:8080" -log "$LOGDIR/portal-scale.log" ${SCALE_ARGS:-}
}

case $what in
all) throughput; scale ;;
throughput) throughput ;;
scale) scale ;;
*) echo "usage: $0 [all|throughput|scale]" >&2; exit 2 ;;
esac
