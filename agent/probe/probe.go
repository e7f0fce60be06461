// Package probe runs a container's readiness, liveness and startup probes
// the way kubelet does: httpGet, tcpSocket, exec and grpc handlers, honouring
// initialDelaySeconds, periodSeconds, timeoutSeconds and the success and
// failure thresholds. It owns only the probing: it reports results through
// a callback and never starts, kills or looks up processes itself (exec
// probes run through an injected Exec).
package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Result is the outcome of one probe or of a probe's thresholds.
type Result int

const (
	// Unknown is the result before the thresholds decided anything.
	Unknown Result = iota
	// Success means the probe passed.
	Success
	// Failure means the probe failed.
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	}
	return "unknown"
}

// Kind is which probe of a container this is.
type Kind string

// The three probes of a container.
const (
	Readiness Kind = "Readiness"
	Liveness  Kind = "Liveness"
	Startup   Kind = "Startup"
)

// Initial is a probe's result before its first verdict: a container is not
// ready until proven ready, alive until proven dead, and not started until
// its startup probe passes.
func Initial(k Kind) Result {
	switch k {
	case Readiness:
		return Failure
	case Liveness:
		return Success
	}
	return Unknown
}

// Counter applies the success and failure thresholds: the result changes
// only after that many equal results in a row. Its zero value counts with
// thresholds of 1 from Unknown.
type Counter struct {
	SuccessThreshold, FailureThreshold int32
	Current                            Result
	last                               Result
	run                                int32
}

// Observe records one probe result and returns the thresholded result and
// whether it changed.
func (c *Counter) Observe(r Result) (Result, bool) {
	if r == c.last {
		c.run++
	} else {
		c.last, c.run = r, 1
	}
	if (r == Failure && c.run < max(c.FailureThreshold, 1)) || (r == Success && c.run < max(c.SuccessThreshold, 1)) {
		return c.Current, false
	}
	changed := c.Current != r
	c.Current = r
	return r, changed
}

// Exec runs cmd inside the container's namespaces and returns its exit
// code and output; an error means it could not run at all.
type Exec func(ctx context.Context, cmd []string) (exitCode int, output []byte, err error)

// Target is what a probe's handler is aimed at.
type Target struct {
	// Host is the address httpGet and tcpSocket use when the probe names
	// none, and the one grpc always uses: the pod IP.
	Host string
	// Ports are the container's ports, for named target ports.
	Ports []corev1.ContainerPort
	// Exec runs exec probes.
	Exec Exec
}

// Run probes once with h and returns the result and, on failure, why. A
// success may come with a warning too (an httpGet redirect to another host).
func Run(ctx context.Context, h corev1.ProbeHandler, timeout time.Duration, t Target) (Result, string) {
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case h.HTTPGet != nil:
		return httpGet(ctx, h.HTTPGet, t)
	case h.TCPSocket != nil:
		return tcpSocket(ctx, h.TCPSocket, t)
	case h.Exec != nil:
		if t.Exec == nil {
			return Failure, "exec probes are not available"
		}
		code, out, err := t.Exec(ctx, h.Exec.Command)
		switch {
		case ctx.Err() != nil:
			return Failure, fmt.Sprintf("command timed out after %v", timeout)
		case err != nil:
			return Failure, err.Error()
		case code != 0:
			return Failure, fmt.Sprintf("command exited with %d: %s", code, strings.TrimSpace(string(out)))
		}
		return Success, ""
	case h.GRPC != nil:
		return grpcCheck(ctx, h.GRPC, timeout, t)
	}
	return Failure, "probe has no handler"
}

// resolvePort turns a target port (number or container port name) into a
// number.
func resolvePort(p intstr.IntOrString, ports []corev1.ContainerPort) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return resolvePort(intstr.FromInt32(int32(n)), ports)
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
}

func tcpSocket(ctx context.Context, s *corev1.TCPSocketAction, t Target) (Result, string) {
	port, err := resolvePort(s.Port, t.Ports)
	if err != nil {
		return Failure, err.Error()
	}
	host := s.Host
	if host == "" {
		host = t.Host
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return Failure, err.Error()
	}
	c.Close()
	return Success, ""
}

// userAgent is what kubelet's probes send, with Portal's name.
const userAgent = "kube-probe/portal"

func httpGet(ctx context.Context, g *corev1.HTTPGetAction, t Target) (Result, string) {
	port, err := resolvePort(g.Port, t.Ports)
	if err != nil {
		return Failure, err.Error()
	}
	host := g.Host
	if host == "" {
		host = t.Host
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	if p, err := url.Parse(path); err == nil {
		u.Path, u.RawQuery = p.Path, p.RawQuery
	} else {
		u.Path = path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Failure, err.Error()
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Failure, fmt.Sprintf("Get %q: timeout", u)
		}
		return Failure, err.Error()
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return Success, ""
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// A redirect that was not followed: to another host (or without a
		// Location). kubelet counts it as success with a warning.
		return Success, fmt.Sprintf("Probe terminated redirects, response %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}

// maxRedirects caps the requests of one httpGet probe that follows
// same-host redirects (the probe fails at the cap), as kubelet and Go's
// default: 10 requests, so 9 redirects followed.
const maxRedirects = 10

// probeClient keeps no connections between probes (each probe is a fresh
// connection, as kubelet's) and does not verify HTTPS certificates. It
// follows redirects only to the probed host (any port): a probe is about
// the pod, and a redirect elsewhere (a login page, say) says nothing about
// it, so it stops there and the 3xx is judged.
var probeClient = &http.Client{
	Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		Proxy:             nil,
	},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	},
}

// grpcCheck calls the standard grpc.health.v1.Health/Check on the pod's
// port for g.Service, over a fresh plaintext connection (kubelet's gRPC
// probes use no TLS). Only SERVING passes.
func grpcCheck(ctx context.Context, g *corev1.GRPCAction, timeout time.Duration, t Target) (Result, string) {
	if g.Port <= 0 || g.Port > 65535 {
		return Failure, fmt.Sprintf("invalid port %d", g.Port)
	}
	addr := net.JoinHostPort(t.Host, strconv.Itoa(int(g.Port)))
	// passthrough: the address is an IP and needs no resolver. No proxy from
	// the environment, as for httpGet: the probe goes straight to the pod.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithNoProxy(),
		grpc.WithUserAgent(userAgent))
	if err != nil {
		return Failure, err.Error()
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		st := status.Convert(err)
		// The connection state tells a server that never came up from one
		// that came up and failed the call.
		connected := conn.GetState() == connectivity.Ready
		switch {
		case st.Code() == codes.DeadlineExceeded && !connected:
			return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v", addr, timeout)
		case st.Code() == codes.DeadlineExceeded:
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)
		case st.Code() == codes.Unavailable && !connected:
			return Failure, fmt.Sprintf("error: failed to connect service at %q: %s", addr, st.Message())
		case st.Code() == codes.Unimplemented:
			return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message())
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %s: %s", st.Code(), st.Message())
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", s)
	}
	return Success, ""
}
