#!/usr/bin/env bash
# Userspace-mode benchmark against the L4 anchors, in one run:
#   direct, haproxy, Portal userspace, haproxy (A/B/A), then open-loop latency
#   at half of Portal's keep-alive peak (direct, haproxy, Portal, direct), and the
#   time requests spend in each proxy, from a packet capture (RESULT residence).
# Usage (root): bench/proxy/userspace.sh            (about 7 minutes)
# Env: ANCHORS (the anchor scripts; default ../shared/anchors or /work/shared/anchors),
#      DUR (wrk seconds, 15), LAT_DUR (latency seconds, 10), LAT_RATE (default: half of
#      Portal's keep-alive req/s), QUIET_MAX (s to wait for quiet cores, 20), KEEP=1 keeps logs,
#      PORTAL_BEFORE (another portal binary, e.g. an older build, also run as "portal-before").
#
# Layout (the anchors' own): a network namespace with only lo; nginx (1 worker) on core 1
# with the client (wrk, curl, the latency client); the proxy under test on core 0.
# Portal needs an API server: `portal apiserver` runs in the same namespace on core 1
# (idle during the runs) and holds one selector-less NodePort Service whose EndpointSlice
# points at the nginx. An EndpointSlice may not hold a loopback address, so the namespace's
# lo also carries 10.244.0.10 and the nginx listens there too; `portal proxy --proxy-mode
# userspace` runs as nobody (the no-root path: NodePorts only, on all addresses; the
# loopback ones are not node addresses for --nodeport-addresses), so wrk reaches it at
# 127.0.0.1:30080 like the others.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
if [ -z "${ANCHORS:-}" ]; then
  for d in "$repo/../shared/anchors" /work/shared/anchors; do [ -d "$d" ] && ANCHORS=$(cd "$d" && pwd) && break; done
fi
[ -x "$ANCHORS/l4_bench.sh" ] || { echo "set ANCHORS to the anchor scripts" >&2; exit 2; }
need=()
command -v nginx >/dev/null || need+=(nginx-light)
command -v haproxy >/dev/null || need+=(haproxy)
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
command -v tcpdump >/dev/null || need+=(tcpdump)
if ((${#need[@]})); then apt-get install -y -qq "${need[@]}" >/dev/null; fi

./hack/build.sh
go build -o bin/bench-latency ./bench/proxy-userspace

# The anchors' knobs, pointed at a namespace and directory of our own so that a
# concurrent anchor run (netns anc-l4) is not disturbed.
export NS=portal-us-$$ L4RUN=/tmp/portal-us-$$
export LOGDIR=$L4RUN/logs QUIET_MAX=${QUIET_MAX:-20} DUR=${DUR:-15}
: "${LAT_DUR:=10}"
backend_ip=10.244.0.10 api_port=16443 node_port=30080
. "$ANCHORS/lib.sh"
inns() { nsenter --net="/run/netns/$NS" "$@"; }
api_pid= proxy_pid= tcpdump_pid=
cleanup() {
  [ -n "$tcpdump_pid" ] && stop_pid "$tcpdump_pid"
  [ -n "$proxy_pid" ] && stop_pid "$proxy_pid"
  [ -n "$api_pid" ] && stop_pid "$api_pid"
  "$ANCHORS/l4_backend.sh" stop || true
  if [ -n "${KEEP:-}" ]; then echo "# logs in $LOGDIR" >&2; else rm -rf "$L4RUN"; fi
}
trap cleanup EXIT

echo "# $(date -u +%FT%TZ) $(uname -r) nproc=$(nproc) $(git -C "$repo" rev-parse --short HEAD)"
"$ANCHORS/l4_backend.sh" start
# The NodePort is in the namespace's ephemeral range: keep connections (the API
# server's own, the runs') from taking it as a local port.
inns sysctl -qw net.ipv4.ip_local_reserved_ports=$node_port
inns ip addr add "$backend_ip/32" dev lo
sed -i "s|listen 127.0.0.1:8080 backlog=4096;|& listen $backend_ip:8080 backlog=4096;|" "$L4RUN/nginx/nginx.conf"
inns nginx -p "$L4RUN/nginx" -c "$L4RUN/nginx/nginx.conf" -s reload
inns bash -c "$(declare -f wait_tcp); wait_tcp $backend_ip 8080 100"

# The API server, on the client's core, and the Service.
mkdir -p "$L4RUN/api" "$L4RUN/kc"
nsenter --net="/run/netns/$NS" taskset -c "$CLIENT_CORE" bin/portal apiserver --data-dir "$L4RUN/api" \
  --secure-port $api_port --advertise-address $backend_ip > "$LOGDIR/apiserver.log" 2>&1 &
api_pid=$!
for _ in $(seq 1 300); do inns curl -skf "https://127.0.0.1:$api_port/readyz" >/dev/null && break; sleep 0.3; done
inns curl -skf "https://127.0.0.1:$api_port/readyz" >/dev/null || { tail -20 "$LOGDIR/apiserver.log"; exit 1; }
install -m 0644 "$L4RUN/api/admin.kubeconfig" "$L4RUN/kc/kubeconfig"
chmod 0755 "$L4RUN" "$L4RUN/kc"
kubectl() { inns "$repo/bin/portal" kubectl --kubeconfig "$L4RUN/kc/kubeconfig" "$@"; }
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  ports: [{name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: $node_port}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints: [{addresses: ["$backend_ip"], conditions: {ready: true}}]
YAML

proxy_args=(--kubeconfig "$L4RUN/kc/kubeconfig" --proxy-mode userspace --hostname-override bench
  --healthz-bind-address= --metrics-bind-address 127.0.0.1:10349)
as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
portal=("${as_nobody[@]}" "$repo/bin/portal" proxy "${proxy_args[@]}")
results=$L4RUN/results.txt
run() { "$@" | tee -a "$results"; }

log "core use before the runs: $(top -bn1 | sed -n 3p)"
run "$ANCHORS/l4_bench.sh" direct 8080
run "$ANCHORS/l4_haproxy.sh" 8081
if [ -n "${PORTAL_BEFORE:-}" ]; then
  run "$ANCHORS/l4_proxy_bench.sh" portal-before $node_port -- "${as_nobody[@]}" "$PORTAL_BEFORE" proxy "${proxy_args[@]}"
fi
run "$ANCHORS/l4_proxy_bench.sh" portal-userspace $node_port -- "${portal[@]}"
"$ANCHORS/l4_haproxy.sh" 8081 | sed 's/^RESULT l4 haproxy /RESULT l4 haproxy-b /' | tee -a "$results"

# Latency at a fixed rate: half of Portal's keep-alive peak, end to end
# (direct, haproxy, Portal, direct) and, for the proxies, the time each
# request spent in the proxy, from a packet capture of the same run (see
# bench/proxy-userspace/residence.go: on this layout the end-to-end p99s
# swing by milliseconds with the client core's queueing, and direct is no
# baseline for them).
peak=$(awk '/^RESULT l4 portal-userspace keepalive/{sub("rps=","",$5); print $5}' "$results")
rate=${LAT_RATE:-$(awk -v p="$peak" 'BEGIN{printf "%d", p/2}')}
lat() { # name port
  inns nice -n "$NICE" taskset -c "$CLIENT_CORE" bin/bench-latency -name "$1" -addr "127.0.0.1:$2" \
    -rate "$rate" -duration "${LAT_DUR}s" | tee -a "$results"
}
with_proxy() { # name port backend-port -- cmd... : lat against a proxy on core 0, then again captured
  local name=$1 port=$2 bport=$3; shift 4
  nsenter --net="/run/netns/$NS" taskset -c "$SERVER_CORE" nice -n "$NICE" "$@" > "$LOGDIR/lat-$name.log" 2>&1 &
  proxy_pid=$!
  inns bash -c "$(declare -f wait_tcp); wait_tcp 127.0.0.1 $port 100"
  sleep 0.5
  lat "$name" "$port"
  # The capture costs the client core, so its end-to-end figures are
  # labelled apart. SYNs and segments with data, headers and the start of
  # the payload (the requests' connection tag pairs the proxy's sides).
  nsenter --net="/run/netns/$NS" taskset -c "$CLIENT_CORE" tcpdump -i lo -n -s 128 -B 262144 --time-stamp-precision=nano \
    -w "$L4RUN/$name.pcap" "(port $port or port $bport) and (tcp[tcpflags] & tcp-syn != 0 or ip[2:2] - ((ip[0]&0xf)<<2) - ((tcp[12]&0xf0)>>2) != 0)" \
    2> "$LOGDIR/tcpdump-$name.log" &
  tcpdump_pid=$!
  for _ in $(seq 1 50); do grep -q 'listening on' "$LOGDIR/tcpdump-$name.log" && break; sleep 0.1; done
  lat "$name-captured" "$port"
  # libpcap hands over a ring block when it is full or 1 s old, and drops
  # the one it is filling when killed: wait for the last one.
  sleep 2
  kill "$tcpdump_pid" 2>/dev/null || true
  wait "$tcpdump_pid" || true
  tcpdump_pid=
  stop_pid "$proxy_pid"
  proxy_pid=
  grep -E 'captured|dropped' "$LOGDIR/tcpdump-$name.log" | sed "s/^/# $name: /" | tee -a "$results"
  bin/bench-latency -pcap "$L4RUN/$name.pcap" -front "$port" -back "$bport" -name "$name" | tee -a "$results" ||
    echo "# $name: no residence figures (see above)" | tee -a "$results"
  rm -f "$L4RUN/$name.pcap"
}
# direct brackets the proxies.
lat direct 8080
with_proxy haproxy 8081 8080 -- haproxy -db -f "$L4RUN/haproxy.cfg"
with_proxy portal-userspace $node_port 8080 -- "${portal[@]}"
lat direct-b 8080
echo "# summary"
cat "$results" | grep ^RESULT
# The proxy's CPU per request (keepalive) or per connection (close): its
# process CPU over the run divided by the requests, less disturbed by a
# busy box than the rates themselves.
echo "# proxy CPU per request / connection"
awk '/^RESULT l4 / && /rps=/ {
  rps=$5; sub("rps=","",rps); pct=""; for (i=1;i<=NF;i++) if ($i ~ /^proxy_cpu_pct=/) { pct=$i; sub("proxy_cpu_pct=","",pct) }
  if (pct != "" && pct != "n/a" && rps > 0) printf "CPU %s %s us_per_req=%.1f\n", $3, $4, 1e4*pct/rps }' "$results"
