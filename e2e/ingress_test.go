package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The Ingress tests share one bed: a node running `portal server` with its
// ingress component on the default ports 80 and 443, pods of the backends
// below, and a client outside the node (the bed's router namespace) that
// reaches the node at ingressNodeIP, as a machine on its network would.
const ingressNodeIP = "10.100.1.1"

// ingressBed is the shared bed of the Ingress tests.
type ingressBed struct {
	*workloadBed
	// self is this test binary, run by pods as the backends' server.
	self string
	// http is a client whose connections leave from the client namespace
	// to the node, whatever host a URL names: the URL's host is what the
	// request carries in Host (and in SNI for https).
	http *http.Client
	// otherLog is the output of the second controller, once started (see
	// startOtherController).
	otherLog string
}

// newIngressBed starts the server and the backends every test uses: the
// Deployments alpha and beta (one replica each) and web (three), each
// behind a Service of the same name on port 80, a Service empty whose
// selector matches no pod, and a gRPC server behind the Services grpc and
// grpc-native, whose ports say appProtocol kubernetes.io/h2c and grpc.
func newIngressBed(t *testing.T) *ingressBed {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ib := &ingressBed{workloadBed: newWorkloadBed(t, false), self: self}
	ib.http = &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:         ib.dialNode,
			MaxIdleConnsPerHost: 64,
		},
		// Redirects are what some tests look at: never follow them.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for _, d := range []struct {
		name     string
		replicas int32
	}{{"alpha", 1}, {"beta", 1}, {"web", 3}} {
		apply(t, ib.server, ib.backendDeployment(d.name, d.replicas))
		apply(t, ib.server, ingressService(d.name, d.name, 8080, ""))
	}
	apply(t, ib.server, ingressService("empty", "nothing-has-this-label", 8080, ""))
	apply(t, ib.server, ingressService("grpc", "grpc", 9090, "kubernetes.io/h2c"))
	apply(t, ib.server, ingressService("grpc-native", "grpc", 9090, "grpc"))
	ib.createGRPCPod()
	for _, d := range []string{"alpha", "beta", "web"} {
		waitComplete(t, ib.c, "default", d, 2*time.Minute)
	}
	return ib
}

// dialNode connects from the client namespace to the node's port of addr,
// whatever host addr names.
func (ib *ingressBed) dialNode(ctx context.Context, network, addr string) (net.Conn, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	return ib.router.DialContext(ctx, "tcp", net.JoinHostPort(ingressNodeIP, port))
}

// backendDeployment is a Deployment of the Ingress backend server (see
// ingressBackendEnv).
func (ib *ingressBed) backendDeployment(name string, replicas int32) *appsv1.Deployment {
	return httpDeployment(name, replicas, corev1.Container{Name: "http", Image: "ingress-backend", Command: []string{ib.self},
		Env: []corev1.EnvVar{{Name: ingressBackendEnv, Value: ":8080"}}})
}

// ingressService is a Service on port 80 to targetPort of the pods labelled
// app=app, with the port's appProtocol when not empty.
func ingressService(name, app string, targetPort int32, appProtocol string) *corev1.Service {
	port := corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(targetPort)}
	if appProtocol != "" {
		port.AppProtocol = ptr.To(appProtocol)
	}
	return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app}, Ports: []corev1.ServicePort{port}}}
}

// createGRPCPod runs this test binary as a gRPC health server (see
// grpcHealthEnv) that answers SERVING.
func (ib *ingressBed) createGRPCPod() {
	serving := ib.t.TempDir() + "/serving"
	if err := os.WriteFile(serving, nil, 0o644); err != nil {
		ib.t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "grpc", Labels: map[string]string{"app": "grpc"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "grpc", Image: "grpc-health", Command: []string{ib.self},
			Env:   []corev1.EnvVar{{Name: grpcHealthEnv, Value: ":9090"}, {Name: grpcHealthFileEnv, Value: serving}},
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 9090}},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}}}}}
	if _, err := ib.c.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		ib.t.Fatal(err)
	}
}

// path is one path of an Ingress rule, served by the Service svc port 80.
type path struct {
	path string
	typ  networkingv1.PathType
	svc  string
}

var (
	exact        = networkingv1.PathTypeExact
	prefix       = networkingv1.PathTypePrefix
	implSpecific = networkingv1.PathTypeImplementationSpecific
)

// rule is an Ingress rule for host with paths.
func rule(host string, paths ...path) networkingv1.IngressRule {
	r := networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{}}}
	for _, p := range paths {
		r.HTTP.Paths = append(r.HTTP.Paths, networkingv1.HTTPIngressPath{Path: p.path, PathType: ptr.To(p.typ),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: p.svc,
				Port: networkingv1.ServiceBackendPort{Number: 80}}}})
	}
	return r
}

// ingress is an Ingress of class portal with rules.
func ingress(name string, rules ...networkingv1.IngressRule) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       networkingv1.IngressSpec{IngressClassName: ptr.To("portal"), Rules: rules},
	}
}

// answer is what a client got for one request: the status and the
// backend that answered (the body of the backends' server), or the
// transport error.
type answer struct {
	code     int
	backend  string
	location string // the Location header, for redirects
	err      error
}

func (a answer) String() string {
	if a.err != nil {
		return "error: " + a.err.Error()
	}
	if a.backend == "" {
		return fmt.Sprint(a.code)
	}
	return fmt.Sprintf("%d from %s", a.code, a.backend)
}

// curl sends GET url from the client namespace with curl, the name in the
// URL resolved to the node, and returns what came back. The path is sent
// as written (--path-as-is).
func (ib *ingressBed) curl(url string, extra ...string) answer {
	host, port := hostPortOf(url)
	args := append([]string{"-s", "-m", "5", "--path-as-is", "--resolve", host + ":" + port + ":" + ingressNodeIP,
		"-D", "-", "-o", "/dev/null", "-w", "%{http_code}"}, extra...)
	var stdout, stderr strings.Builder
	cmd := ib.router.Command("curl", append(args, url)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// curl's exit status says what went wrong (7: refused, 28: timeout).
		return answer{err: fmt.Errorf("curl: %v %s", err, strings.TrimSpace(stderr.String()))}
	}
	out := stdout.String()
	var a answer
	lines := strings.Split(strings.TrimSpace(out), "\n")
	fmt.Sscan(lines[len(lines)-1], &a.code)
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ":")
		switch {
		case ok && strings.EqualFold(k, "X-Backend"):
			a.backend = strings.TrimSpace(v)
		case ok && strings.EqualFold(k, "Location"):
			a.location = strings.TrimSpace(v)
		}
	}
	return a
}

// hostPortOf is the host and port of an http or https URL.
func hostPortOf(url string) (string, string) {
	scheme, rest, _ := strings.Cut(url, "://")
	hostport, _, _ := strings.Cut(rest, "/")
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	if scheme == "https" {
		return hostport, "443"
	}
	return hostport, "80"
}

// service is the Service whose pod a backend's name belongs to
// ("alpha-6d4f9-x2x7q" → "alpha"), or "" when there is none.
func serviceOf(backend string) string {
	name, _, _ := strings.Cut(backend, "-")
	return name
}

// TestIngress is issue #18's "Must show": an Ingress controller serving
// what users write, checked from a client outside the node with curl, Go's
// HTTP, WebSocket and gRPC clients; then what an operator sets and reads:
// metrics, the access log, timeouts and redirects by annotation, the
// client body timeout, a backend the controller cannot serve.
func TestIngress(t *testing.T) {
	ib := newIngressBed(t)
	t.Run("path matching", ib.testPathMatching)
	t.Run("forwarded headers", ib.testForwardedHeaders)
	t.Run("class and status", ib.testClassAndStatus)
	t.Run("tls", ib.testTLS)
	t.Run("websocket and grpc", ib.testWebSocketAndGRPC)
	t.Run("bad input", ib.testBadInput)
	t.Run("no failed request under change", ib.testNoFailedRequest)
	t.Run("metrics", ib.testMetrics)
	t.Run("access log", ib.testAccessLog)
	t.Run("timeout annotations", ib.testTimeoutAnnotations)
	t.Run("ssl-redirect annotation", ib.testSSLRedirectAnnotation)
	t.Run("a stalled request body", ib.testStalledBody)
	t.Run("an ExternalName backend", ib.testExternalName)
	// Last: the defaultBackend takes every request no rule matches.
	t.Run("default backend", ib.testDefaultBackend)
}

// keptConn is a client connection to the node that a test keeps open
// across changes, writing its requests by hand: a connection the
// controller closed shows as an error, where Go's client would quietly
// dial a new one.
type keptConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// keep connects from the client namespace to the node's port, over TLS
// when tlsConf is set, and closes the connection when the test ends.
func (ib *ingressBed) keep(t *testing.T, port string, tlsConf *tls.Config) *keptConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := ib.dialNode(ctx, "tcp", port)
	if err != nil {
		t.Fatal(err)
	}
	if tlsConf != nil {
		tc := tls.Client(conn, tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			t.Fatal(err)
		}
		conn = tc
	}
	t.Cleanup(func() { conn.Close() })
	return &keptConn{conn: conn, r: bufio.NewReader(conn)}
}

// get sends GET path with Host host on the connection and reads the
// answer.
func (k *keptConn) get(host, path string) answer {
	k.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(k.conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host); err != nil {
		return answer{err: err}
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return answer{err: err}
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return answer{code: resp.StatusCode, backend: resp.Header.Get("X-Backend")}
}
