package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

// load sends GET and POST url at a steady rate from the client namespace, each
// request on its own goroutine over kept-alive connections, and keeps
// every failure: a transport error, a status other than 2xx, or an answer
// from a pod that is not of the Service want.
type load struct {
	client *http.Client
	url    string
	want   string
	start  time.Time
	stop   chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	sent     int
	done     int
	failures []string
}

func startLoad(client *http.Client, url, want string, perSecond int) *load {
	l := &load{client: client, url: url, want: want, start: time.Now(), stop: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
				l.mu.Lock()
				l.sent++
				l.mu.Unlock()
				l.wg.Add(1)
				go l.one()
			}
		}
	}()
	return l
}

func (l *load) one() {
	defer l.wg.Done()
	l.mu.Lock()
	n := l.sent
	l.mu.Unlock()
	at := time.Since(l.start)
	var failure string
	// Every other request is a POST with a body: Go's client sends a GET
	// again by itself when a kept-alive connection turns out closed, a
	// POST it does not, so a connection the controller drops shows.
	var resp *http.Response
	var err error
	if n%2 == 0 {
		resp, err = l.client.Get(l.url)
	} else {
		resp, err = l.client.Post(l.url, "text/plain", strings.NewReader("request body"))
	}
	if err != nil {
		failure = err.Error()
	} else {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			failure = fmt.Sprintf("%d, reading the body: %v", resp.StatusCode, err)
		case resp.StatusCode/100 != 2:
			failure = fmt.Sprintf("%s: %q", resp.Status, body)
		case serviceOf(string(body)) != l.want:
			failure = fmt.Sprintf("%s from %q, want a pod of %s", resp.Status, body, l.want)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done++
	if failure != "" {
		l.failures = append(l.failures, fmt.Sprintf("at %v: %s", at.Round(time.Millisecond), failure))
	}
}

// waitDone waits until n more requests than now have been answered.
func (l *load) waitDone(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	target := l.done + n
	l.mu.Unlock()
	eventuallyWithin(t, time.Minute, fmt.Sprintf("%d more requests answered", n), func() (bool, string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.done >= target, fmt.Sprintf("%d answered, want %d", l.done, target)
	})
}

// finish stops the load, waits for the requests under way, and returns
// how many were sent and the failures.
func (l *load) finish() (int, []string) {
	close(l.stop)
	l.wg.Wait()
	return l.sent, l.failures
}

// testNoFailedRequest: while a client sends 200 requests a second through
// the Ingress, one of the three pods of the Deployment web is deleted (it
// drains for 3 s, see ingressBackendEnv), and then the Ingress's paths
// change under the requests' path. Not one request may fail, and a
// connection opened before still works after: the controller follows the
// EndpointSlices and swaps its rules with no dropped connection
// (kubernetes/ingress-nginx#7097 is the bar).
func (ib *ingressBed) testNoFailedRequest(t *testing.T) {
	apply(t, ib.server, ingress("load", rule("load.test", path{"/app", prefix, "web"})))
	eventuallyWithin(t, 30*time.Second, "the Ingress load served", func() (bool, string) {
		a := ib.curl("http://load.test/app/x")
		return a.code == 200 && serviceOf(a.backend) == "web", fmt.Sprintf("GET http://load.test/app/x: got %v, want 200 from web", a)
	})
	before := waitReadyEndpoints(t, ib.c, 3)

	// A connection opened before the changes, used after them.
	kept := ib.keep(t, ":80", nil)
	if got := kept.get("load.test", "/app/x"); got.code != 200 || serviceOf(got.backend) != "web" {
		t.Fatalf("GET http://load.test/app/x on a new connection: got %v, want 200 from web", got)
	}

	l := startLoad(ib.http, "http://load.test/app/x", "web", 200)
	defer func() {
		if l != nil {
			l.finish()
		}
	}()
	l.waitDone(t, 400)

	var victim string
	for name := range before {
		victim = name
		break
	}
	ib.server.MustKubectl("delete", "pod", victim, "--wait=false")
	eventuallyWithin(t, 2*time.Minute, "three ready endpoints without "+victim, func() (bool, string) {
		eps, _ := endpointsOf(t, ib.c, "default", "web")
		var ready []string
		for _, ep := range eps {
			if ptr.Deref(ep.Conditions.Ready, false) && ep.TargetRef != nil && ep.TargetRef.Name != victim {
				ready = append(ready, ep.TargetRef.Name)
			}
		}
		return len(ready) == 3, fmt.Sprintf("ready endpoints other than %s: %v", victim, ready)
	})
	l.waitDone(t, 400)

	// The new paths: the requests' path by an Exact rule now, everything
	// else of the host to beta.
	apply(t, ib.server, ingress("load", rule("load.test", path{"/app/x", exact, "web"}, path{"/", prefix, "beta"})))
	eventuallyWithin(t, 30*time.Second, "the changed paths served", func() (bool, string) {
		a := ib.curl("http://load.test/app/y")
		return a.code == 200 && serviceOf(a.backend) == "beta", fmt.Sprintf("GET http://load.test/app/y: got %v, want 200 from beta", a)
	})
	l.waitDone(t, 800)

	sent, failures := l.finish()
	l = nil
	t.Logf("%d requests sent while %s was deleted and the paths changed", sent, victim)
	if got := kept.get("load.test", "/app/x"); got.code != 200 || serviceOf(got.backend) != "web" {
		t.Errorf("GET http://load.test/app/x on the connection opened before the changes: got %v, want 200 from web", got)
	}
	if len(failures) > 0 {
		shown := failures[:min(len(failures), 30)]
		t.Errorf("%d of %d requests failed; want none. The first ones:\n%s", len(failures), sent, strings.Join(shown, "\n"))
	}
}
