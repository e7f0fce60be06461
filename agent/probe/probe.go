// Package probe runs a container's readiness, liveness and startup probes
// the way kubelet does: httpGet, tcpSocket and exec handlers, honouring
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
	// none: the pod IP.
	Host string
	// Ports are the container's ports, for named target ports.
	Ports []corev1.ContainerPort
	// Exec runs exec probes.
	Exec Exec
}

// Run probes once with h and returns the result and, on failure, why.
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
		return Failure, "grpc probes are not supported by portal agent"
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
	// kubelet counts 2xx and 3xx as success; a redirect is not followed.
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return Success, ""
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}

// probeClient keeps no connections between probes (each probe is a fresh
// connection, as kubelet's) and does not verify HTTPS certificates.
var probeClient = &http.Client{
	Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		Proxy:             nil,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}
