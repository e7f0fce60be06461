package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
		open := false
		var got []event
		w := &Worker{Kind: Readiness, StartedAt: start, Target: Target{Exec: s.exec},
			Probe:    &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1},
			Gate:     func() bool { return open },
			OnResult: func(r Result, _ string) { got = append(got, event{time.Since(start), r}) }}
		time.AfterFunc(2500*time.Millisecond, func() { open = true })
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
		{"http redirect is success, not followed", get("/redirect", intstr.FromInt32(int32(port))), Success},
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
