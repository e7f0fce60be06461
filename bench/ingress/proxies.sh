# Sourced by run.sh: proxy_NAME writes NAME's configuration and benchmarks it (bench_proxy).
# Every proxy does what an Ingress controller does for a host-less rule `/` to one Service:
# HTTP on $http_port and HTTPS on $https_port (HTTP/2 offered by ALPN), the same certificate,
# keep-alive connections to the endpoint, no response buffering to disk, no access log, and the
# forwarded headers ingress-nginx sets (Host kept, X-Forwarded-For/-Proto/-Host, X-Request-ID).
# Each runs one worker (nginx, HAProxy) or, pinned to one core, GOMAXPROCS=1 (Caddy, Portal).
# The Go floors (floor, floorparse) are not Ingress controllers but the least a Go proxy does
# (bench/ingress/floor.go): plain HTTP only, no forwarded headers; not in the default ORDER.

proxy_nginx() {
  mkdir -p "$L4RUN/px-nginx/logs" "$L4RUN/px-nginx/tmp"
  cat > "$L4RUN/px-nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $L4RUN/px-nginx/nginx.pid;
error_log $L4RUN/px-nginx/logs/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path $L4RUN/px-nginx/tmp; proxy_temp_path $L4RUN/px-nginx/tmp;
  fastcgi_temp_path $L4RUN/px-nginx/tmp; uwsgi_temp_path $L4RUN/px-nginx/tmp; scgi_temp_path $L4RUN/px-nginx/tmp;
  keepalive_requests 100000000; keepalive_timeout 65;
  ssl_protocols TLSv1.2 TLSv1.3;
  upstream web { server $backend_ip:8080; keepalive 320; keepalive_requests 100000000; }
  server {
    listen 127.0.0.1:$http_port backlog=4096;
    listen 127.0.0.1:$https_port ssl http2 backlog=4096;
    ssl_certificate $L4RUN/tls/cert.pem; ssl_certificate_key $L4RUN/tls/key.pem;
    location / {
      proxy_pass http://web;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_set_header X-Forwarded-Host \$host;
      proxy_set_header X-Request-ID \$request_id;
      # ingress-nginx's defaults: responses streamed through one 4k buffer.
      proxy_buffering off;
      proxy_buffer_size 4k;
    }
  }
}
CONF
  bench_proxy nginx nginx -p "$L4RUN/px-nginx" -c "$L4RUN/px-nginx/nginx.conf"
}

proxy_haproxy() {
  mkdir -p "$L4RUN/px-haproxy"
  cat > "$L4RUN/px-haproxy/haproxy.cfg" <<CONF
global
    nbthread 1
    maxconn 8000
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    option forwardfor
    http-reuse always
frontend web
    bind 127.0.0.1:$http_port
    bind 127.0.0.1:$https_port ssl crt $L4RUN/tls/both.pem alpn h2,http/1.1
    http-request set-header X-Forwarded-Proto https if { ssl_fc }
    http-request set-header X-Forwarded-Proto http if !{ ssl_fc }
    http-request set-header X-Forwarded-Host %[req.hdr(host)]
    http-request set-header X-Request-ID %[uuid()]
    default_backend web
backend web
    server e1 $backend_ip:8080
CONF
  bench_proxy haproxy haproxy -db -f "$L4RUN/px-haproxy/haproxy.cfg"
}

proxy_caddy() {
  mkdir -p "$L4RUN/px-caddy"
  cat > "$L4RUN/px-caddy/Caddyfile" <<CONF
{
	admin off
	auto_https off
	servers {
		protocols h1 h2
	}
	default_sni bench.local
}
(web) {
	reverse_proxy $backend_ip:8080 {
		header_up X-Request-ID {http.request.uuid}
		transport http {
			keepalive_idle_conns 320
			keepalive_idle_conns_per_host 320
		}
	}
}
http://:$http_port {
	import web
}
https://:$https_port {
	tls $L4RUN/tls/cert.pem $L4RUN/tls/key.pem
	import web
}
CONF
  HOME=$L4RUN/px-caddy XDG_DATA_HOME=$L4RUN/px-caddy XDG_CONFIG_HOME=$L4RUN/px-caddy \
    bench_proxy caddy caddy run --config "$L4RUN/px-caddy/Caddyfile" --adapter caddyfile
}

proxy_portal() {
  bench_proxy portal "${portal_cmd[@]}"
}

# proxy_floor: the Go floor, request and response heads scanned for CRLFCRLF and passed on.
proxy_floor() {
  HTTP_ONLY=1 bench_proxy floor "$repo/bin/bench-ingress" floor -listen "127.0.0.1:$http_port" -backend "$backend_ip:8080"
}

# proxy_floorparse: the Go floor with the heads also parsed by http.ReadRequest and
# http.ReadResponse.
proxy_floorparse() {
  HTTP_ONLY=1 bench_proxy floorparse "$repo/bin/bench-ingress" floor -parse -listen "127.0.0.1:$http_port" -backend "$backend_ip:8080"
}

# proxy_base: another build of Portal (PORTAL_BASE, a binary) with the same arguments, for a
# before/after comparison within one run: ORDER="base portal" PORTAL_BASE=/tmp/portal-old.
proxy_base() {
  [ -x "${PORTAL_BASE:-}" ] || { echo "set PORTAL_BASE to a portal binary" >&2; return 1; }
  bench_proxy base "$PORTAL_BASE" "${portal_cmd[@]:1}"
}
