package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"portal.dev/portal/e2e/framework"
)

// ingressComponentYAML routes app.example to a Service whose endpoint is
// a server of this test on the host, and missing.example to a Service
// that does not exist.
const ingressComponentYAML = `apiVersion: v1
kind: Service
metadata:
  name: app
spec:
  ports:
  - name: http
    port: 80
    targetPort: %[1]d
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: app-1
  labels:
    kubernetes.io/service-name: app
addressType: IPv4
ports:
- name: http
  port: %[1]d
endpoints:
- addresses: ["%[2]s"]
  conditions: {ready: true}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  rules:
  - host: app.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: app, port: {name: http}}}}
  - host: missing.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: missing, port: {number: 80}}}}
`

// TestIngressComponent runs `portal server` with its Ingress controller
// on free ports of the host (framework.Server.Ingress) and drives it
// through kubectl: the default IngressClass takes the Ingress, requests
// reach the endpoint, a missing Service is a 503 that says so, an unknown
// host a 404, TLS clients of unknown names get the generated certificate
// over HTTP/2, and the Ingress's status carries the published address.
func TestIngressComponent(t *testing.T) {
	backendIP := nonLoopbackIPv4(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(backendIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app %s host=%s proto=%s", r.URL.Path, r.Host, r.Header.Get("X-Forwarded-Proto"))
	}))
	backend.Listener = ln
	backend.Start()
	defer backend.Close()

	s := framework.StartServerWithIngress(t, "--publish-status-address", "192.0.2.80")
	s.MustKubectlStdin(fmt.Sprintf(ingressComponentYAML, ln.Addr().(*net.TCPAddr).Port, backendIP), "apply", "-f", "-")

	get := func(scheme, host, path string) (int, string, *http.Response) {
		port := s.HTTPPort
		if scheme == "https" {
			port = s.HTTPSPort
		}
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: host}}}
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, port, path), nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error(), nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp
	}
	var code int
	var body string
	eventuallyWithin(t, 30*time.Second, "app.example/hello answered 200", func() (bool, string) {
		code, body, _ = get("http", "app.example", "/hello")
		return code == 200, fmt.Sprintf("last answer %d %q", code, body)
	})
	if want := "app /hello host=app.example proto=http"; body != want {
		t.Errorf("app.example: got %q, want %q", body, want)
	}
	for _, tc := range []struct {
		name, scheme, host string
		wantCode           int
		wantBody           string
	}{
		{"missing Service", "http", "missing.example", 503, "service default/missing not found"},
		{"unknown host", "http", "other.example", 404, "no Ingress rule matches this host and path"},
		{"over TLS", "https", "app.example", 200, "proto=https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, resp := get(tc.scheme, tc.host, "/")
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Fatalf("got %d %q, want %d with %q", code, body, tc.wantCode, tc.wantBody)
			}
			if tc.scheme == "https" {
				if resp.ProtoMajor != 2 {
					t.Errorf("got %s, want HTTP/2", resp.Proto)
				}
				if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != "Portal Ingress Default Certificate" {
					t.Errorf("got certificate %q, want the generated default", cn)
				}
			}
		})
	}
	var addr string
	waitFor(t, 30*time.Second, func() bool {
		addr = s.MustKubectl("get", "ingress", "web", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		return addr != ""
	})
	if addr != "192.0.2.80" {
		t.Errorf("status address: got %q, want 192.0.2.80", addr)
	}
}

// nonLoopbackIPv4 is an address of this host that an EndpointSlice may
// list (the API refuses loopback endpoints).
func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this host")
	return ""
}
