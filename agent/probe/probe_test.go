package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestCounter(t *testing.T) {
	S, F := Success, Failure
	cases := []struct {
		name       string
		succ, fail int32
		initial    Result
		in         []Result
		want       []Result
	}{
		{"thresholds of one follow every result", 1, 1, F, []Result{S, F, S}, []Result{S, F, S}},
		{"three failures in a row to fail", 1, 3, S, []Result{F, F, S, F, F, F}, []Result{S, S, S, S, S, F}},
		{"two successes in a row to pass", 2, 1, F, []Result{S, F, S, S, S}, []Result{F, F, F, S, S}},
		{"unknown until the first verdict", 1, 2, Unknown, []Result{F, F}, []Result{Unknown, F}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Counter{SuccessThreshold: tc.succ, FailureThreshold: tc.fail, Current: tc.initial}
			var got []Result
			for _, r := range tc.in {
				v, _ := c.Observe(r)
				got = append(got, v)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestInitial(t *testing.T) {
	for k, want := range map[Kind]Result{Readiness: Failure, Liveness: Success, Startup: Unknown} {
		if got := Initial(k); got != want {
			t.Errorf("%s: got %v, want %v", k, got, want)
		}
	}
}

// scripted is an exec target whose results follow a script, then repeat
// the last one.
type scripted struct {
	mu    sync.Mutex
	codes []int
	calls []time.Duration
	start time.Time
}

func (s *scripted) exec(ctx context.Context, cmd []string) (int, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, time.Since(s.start))
	code := s.codes[0]
	if len(s.codes) > 1 {
		s.codes = s.codes[1:]
	}
	return code, nil, nil
}

type event struct {
	at time.Duration
	r  Result
}

func TestWorker(t *testing.T) {
	execProbe := func(delay, period, succ, fail int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
			InitialDelaySeconds: delay, PeriodSeconds: period, TimeoutSeconds: 1, SuccessThreshold: succ, FailureThreshold: fail}
	}
	cases := []struct {
		name      string
		kind      Kind
		probe     *corev1.Probe
		codes     []int
		run       time.Duration
		wantCalls []time.Duration
		want      []event
	}{
		{"readiness after the initial delay, then every period", Readiness, execProbe(5, 10, 1, 3), []int{0},
			30 * time.Second, []time.Duration{5 * time.Second, 15 * time.Second, 25 * time.Second},
			[]event{{5 * time.Second, Success}}},
		{"readiness fails after three failures and comes back", Readiness, execProbe(0, 1, 1, 3), []int{0, 1, 1, 1, 0},
			5500 * time.Millisecond, nil,
			[]event{{0, Success}, {3 * time.Second, Failure}, {4 * time.Second, Success}}},
		{"liveness reports its failure once and stops", Liveness, execProbe(0, 2, 1, 2), []int{0, 1, 1, 1},
			20 * time.Second, []time.Duration{0, 2 * time.Second, 4 * time.Second},
			[]event{{4 * time.Second, Failure}}},
		{"startup stops at its first success", Startup, execProbe(0, 1, 1, 30), []int{1, 1, 0},
			10 * time.Second, []time.Duration{0, time.Second, 2 * time.Second},
			[]event{{2 * time.Second, Success}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				s := &scripted{codes: tc.codes, start: start}
				var got []event
				w := &Worker{Kind: tc.kind, Probe: tc.probe, StartedAt: start, Target: Target{Exec: s.exec},
					OnResult: func(r Result, _ string) { got = append(got, event{time.Since(start), r}) }}
				ctx, cancel := context.WithTimeout(context.Background(), tc.run)
				defer cancel()
				w.Run(ctx)
				if !slices.Equal(got, tc.want) {
					t.Errorf("results: got %v, want %v", got, tc.want)
				}
				if tc.wantCalls != nil && !slices.Equal(s.calls, tc.wantCalls) {
					t.Errorf("probe times: got %v, want %v", s.calls, tc.wantCalls)
				}
			})
		})
	}
}

// TestWorkerFrom pins that a re-adopted ready container goes unready after
// failureThreshold failures (it used to stay ready: the counter started
// from Failure and saw no change).
func TestWorkerFrom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := &scripted{codes: []int{1}, start: start}
		var got []event
		w := &Worker{Kind: Readiness, StartedAt: start, From: Success, Target: Target{Exec: s.exec},
			Probe:    &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 2},
			OnResult: func(r Result, _ string) { got = append(got, event{time.Since(start), r}) }}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		w.Run(ctx)
		if want := []event{{time.Second, Failure}}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestWorkerGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := &scripted{codes: []int{0}, start: start}
		var open atomic.Bool
		var got []event
		w := &Worker{Kind: Readiness, StartedAt: start, Target: Target{Exec: s.exec},
			Probe:    &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1},
			Gate:     open.Load,
			OnResult: func(r Result, _ string) { got = append(got, event{time.Since(start), r}) }}
		time.AfterFunc(2500*time.Millisecond, func() { open.Store(true) })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.Run(ctx)
		if want := []event{{3 * time.Second, Success}}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestHandlers(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Check") != "1" || r.Host != "probe.example" || r.URL.RawQuery != "a=b" {
			http.Error(w, "bad request", http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	target := Target{Host: host, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}},
		Exec: func(ctx context.Context, cmd []string) (int, []byte, error) {
			if cmd[0] == "slow" {
				<-ctx.Done()
				return -1, nil, ctx.Err()
			}
			return len(cmd) - 1, []byte("out"), nil
		}}
	get := func(path string, p intstr.IntOrString, h ...corev1.HTTPHeader) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: p, HTTPHeaders: h}}
	}
	cases := []struct {
		name string
		h    corev1.ProbeHandler
		want Result
	}{
		{"http 200 with headers and named port", get("/ok?a=b", intstr.FromString("http"), corev1.HTTPHeader{Name: "X-Check", Value: "1"}, corev1.HTTPHeader{Name: "Host", Value: "probe.example"}), Success},
		{"http 400", get("/ok", intstr.FromInt32(int32(port))), Failure},
		{"http redirect to another host is success, not followed", get("/redirect", intstr.FromInt32(int32(port))), Success},
		{"http 503", get("/fail", intstr.FromInt32(int32(port))), Failure},
		{"http timeout", get("/slow", intstr.FromInt32(int32(port))), Failure},
		{"http unknown port name", get("/ok", intstr.FromString("nope")), Failure},
		{"tcp open", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}, Success},
		{"tcp closed", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(closedPort))}}, Failure},
		{"exec exit 0", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, Success},
		{"exec exit 1", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false", "x"}}}, Failure},
		{"exec timeout", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"slow"}}}, Failure},
		{"no handler", corev1.ProbeHandler{}, Failure},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := Run(context.Background(), tc.h, 300*time.Millisecond, target)
			if got != tc.want {
				t.Errorf("got %v (%s), want %v", got, msg, tc.want)
			}
		})
	}
}

// TestHTTPRedirects pins that httpGet follows redirects to the pod, as
// kubelet does, and judges the answer at the end (it used to count any 3xx
// as success, so a pod redirecting to a failing page was Ready).
func TestHTTPRedirects(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	record := func(name string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, name+" "+r.URL.Path)
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	}
	other := httptest.NewServer(record("other", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			http.Error(w, "no", http.StatusInternalServerError)
		}
	})))
	defer other.Close()
	otherPort := other.Listener.Addr().(*net.TCPAddr).Port
	redirect := func(to string, code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, code) }
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusInternalServerError) })
	mux.HandleFunc("/need-host", func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "probe.example" {
			http.Error(w, "wrong host", http.StatusBadRequest)
		}
	})
	mux.Handle("/to-ok", redirect("/ok", http.StatusFound))
	mux.Handle("/to-fail", redirect("/fail", http.StatusFound))
	mux.Handle("/chain", redirect("/to-ok", http.StatusMovedPermanently))
	mux.Handle("/loop", redirect("/loop", http.StatusFound))
	mux.Handle("/to-need-host", redirect("/need-host", http.StatusFound))
	mux.Handle("/to-other-host", redirect(fmt.Sprintf("http://localhost:%d/ok", otherPort), http.StatusFound))
	mux.Handle("/to-other-port", redirect(fmt.Sprintf("http://127.0.0.1:%d/fail", otherPort), http.StatusTemporaryRedirect))
	srv := httptest.NewServer(record("pod", mux))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	target := Target{Host: "127.0.0.1"}
	loop := []string{}
	for range 10 {
		loop = append(loop, "pod /loop")
	}
	cases := []struct {
		name      string
		path      string
		headers   []corev1.HTTPHeader
		want      Result
		wantMsg   string
		wantPaths []string
	}{
		{"same host, then 200", "/to-ok", nil, Success, "", []string{"pod /to-ok", "pod /ok"}},
		{"same host twice, then 200", "/chain", nil, Success, "", []string{"pod /chain", "pod /to-ok", "pod /ok"}},
		{"same host, then 500", "/to-fail", nil, Failure, "statuscode: 500", []string{"pod /to-fail", "pod /fail"}},
		{"same host name on another port, then 500", "/to-other-port", nil, Failure, "statuscode: 500", []string{"pod /to-other-port", "other /fail"}},
		{"the Host header survives the redirect", "/to-need-host", []corev1.HTTPHeader{{Name: "Host", Value: "probe.example"}}, Success, "", []string{"pod /to-need-host", "pod /need-host"}},
		{"redirect loop fails after 10 requests", "/loop", nil, Failure, "stopped after 10 redirects", loop},
		{"another host is not followed: success with a warning", "/to-other-host", nil, Success, "Probe terminated redirects", []string{"pod /to-other-host"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			h := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: tc.path, Port: intstr.FromInt32(int32(port)), HTTPHeaders: tc.headers}}
			got, msg := Run(context.Background(), h, 2*time.Second, target)
			if got != tc.want || !strings.Contains(msg, tc.wantMsg) || (tc.wantMsg == "" && msg != "") {
				t.Errorf("got %v (%q), want %v (%q)", got, msg, tc.want, tc.wantMsg)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, tc.wantPaths) {
				t.Errorf("requests: got %q, want %q", seen, tc.wantPaths)
			}
		})
	}
}

// serveGRPC starts a gRPC server on loopback and returns its port.
func serveGRPC(t *testing.T, register func(*grpc.Server)) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// stuckHealth is a health service whose Check answers only when the caller
// gives up.
type stuckHealth struct {
	healthpb.UnimplementedHealthServer
}

func (stuckHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestGRPC pins grpc probes against real servers (they used to fail
// always: a gRPC readiness probe kept its pod unready forever).
func TestGRPC(t *testing.T) {
	hs := health.NewServer()
	healthPort := serveGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	bare := serveGRPC(t, func(*grpc.Server) {})
	stuck := serveGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, stuckHealth{}) })
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := int32(closed.Addr().(*net.TCPAddr).Port)
	closed.Close()
	// silent accepts connections and never says a word.
	silent, _ := net.Listen("tcp", "127.0.0.1:0")
	defer silent.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	silentPort := int32(silent.Addr().(*net.TCPAddr).Port)

	const (
		serving    = healthpb.HealthCheckResponse_SERVING
		notServing = healthpb.HealthCheckResponse_NOT_SERVING
	)
	svc := func(s string) *string { return &s }
	// The cases run in order on the same health server: set changes its
	// statuses before the probe.
	cases := []struct {
		name    string
		set     map[string]healthpb.HealthCheckResponse_ServingStatus
		port    int32
		service *string
		want    Result
		wantMsg string
	}{
		{"server serving", map[string]healthpb.HealthCheckResponse_ServingStatus{"": serving}, healthPort, nil, Success, ""},
		{"server switched to not serving", map[string]healthpb.HealthCheckResponse_ServingStatus{"": notServing}, healthPort, nil, Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"server serving again", map[string]healthpb.HealthCheckResponse_ServingStatus{"": serving}, healthPort, nil, Success, ""},
		{"named service serving", map[string]healthpb.HealthCheckResponse_ServingStatus{"db": serving}, healthPort, svc("db"), Success, ""},
		{"named service not serving while the server serves", map[string]healthpb.HealthCheckResponse_ServingStatus{"db": notServing}, healthPort, svc("db"), Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", nil, healthPort, svc("nope"), Failure, "NotFound: unknown service"},
		{"server without the health service", nil, bare, nil, Failure, "does not implement the grpc health protocol"},
		{"nothing listening", nil, closedPort, nil, Failure, "failed to connect service at"},
		{"health check never returns", nil, stuck, nil, Failure, "timeout: health rpc did not complete within 1s"},
		{"server never answers", nil, silentPort, nil, Failure, fmt.Sprintf("timeout: failed to connect service %q within 1s", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(silentPort))))},
		{"invalid port", nil, 0, nil, Failure, "invalid port 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for name, st := range tc.set {
				hs.SetServingStatus(name, st)
			}
			h := corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: tc.port, Service: tc.service}}
			got, msg := Run(context.Background(), h, time.Second, Target{Host: "127.0.0.1"})
			if got != tc.want || !strings.Contains(msg, tc.wantMsg) || (tc.wantMsg == "" && msg != "") {
				t.Errorf("got %v (%q), want %v (%q)", got, msg, tc.want, tc.wantMsg)
			}
		})
	}
}

// A readiness probe that fails from the start changes no result (a
// container starts unready), yet each failure must be reported so that
// the agent can say why the pod never became ready.
func TestWorkerOnFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := &scripted{codes: []int{1}, start: start}
		var results []event
		var failures []time.Duration
		w := &Worker{Kind: Readiness, StartedAt: start, Target: Target{Exec: s.exec},
			Probe:     &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			OnResult:  func(r Result, _ string) { results = append(results, event{time.Since(start), r}) },
			OnFailure: func(string) { failures = append(failures, time.Since(start)) }}
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		w.Run(ctx)
		if len(results) != 0 {
			t.Errorf("results: got %v, want none (never ready, still unready)", results)
		}
		if want := []time.Duration{0, time.Second, 2 * time.Second}; !slices.Equal(failures, want) {
			t.Errorf("failures: got %v, want %v", failures, want)
		}
	})
}
