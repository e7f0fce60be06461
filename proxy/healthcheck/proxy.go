// Package healthcheck serves the proxy's health: /healthz and /livez for
// the proxy itself (kube-proxy's semantics), and one HTTP server per
// healthCheckNodePort that tells a load balancer whether this node has
// endpoints of an externalTrafficPolicy Local Service. It owns those
// listeners only; it learns about syncs and Services from the proxy
// core and must not read the API or the kernel itself.
package healthcheck

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ProxyHealth says whether the proxy keeps its data plane up to date:
// healthy unless an update has waited longer than the timeout. /healthz
// additionally fails while the node is being deleted, so load balancers
// drain it; /livez does not, so the proxy is not restarted for that.
type ProxyHealth struct {
	timeout time.Duration
	now     func() time.Time
	// OnResponse, when set, is told each response's path and status code
	// (for metrics).
	OnResponse func(path string, code int)

	mu            sync.Mutex
	lastUpdated   time.Time
	oldestPending time.Time
	notEligible   bool
}

// NewProxyHealth returns a ProxyHealth with the given timeout (kube-proxy
// uses twice the sync period). now may be nil for time.Now.
func NewProxyHealth(timeout time.Duration, now func() time.Time) *ProxyHealth {
	if now == nil {
		now = time.Now
	}
	return &ProxyHealth{timeout: timeout, now: now}
}

// QueuedUpdate records that a change is waiting to be programmed.
func (h *ProxyHealth) QueuedUpdate() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldestPending.IsZero() {
		h.oldestPending = h.now()
	}
}

// Updated records a successful sync: nothing is waiting any more.
func (h *ProxyHealth) Updated() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.oldestPending = time.Time{}
	h.lastUpdated = h.now()
}

// SetNodeEligible records whether this node should receive load balancer
// traffic (false while it is being deleted).
func (h *ProxyHealth) SetNodeEligible(eligible bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notEligible = !eligible
}

// Healthy reports the proxy's own health, ignoring the node.
func (h *ProxyHealth) Healthy() bool {
	ok, _, _ := h.state()
	return ok
}

func (h *ProxyHealth) state() (healthy bool, lastUpdated time.Time, eligible bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	healthy = h.oldestPending.IsZero() || h.now().Sub(h.oldestPending) < h.timeout
	return healthy, h.lastUpdated, !h.notEligible
}

// Handler serves /healthz and /livez.
func (h *ProxyHealth) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { h.serve(w, "/healthz", true) })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) { h.serve(w, "/livez", false) })
	return mux
}

func (h *ProxyHealth) serve(w http.ResponseWriter, path string, withNode bool) {
	healthy, lastUpdated, eligible := h.state()
	if withNode {
		healthy = healthy && eligible
	}
	now := h.now()
	code := http.StatusOK
	if !healthy {
		code = http.StatusServiceUnavailable
	} else {
		// As kube-proxy: a healthy proxy reports itself current.
		lastUpdated = now
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if withNode {
		fmt.Fprintf(w, `{"lastUpdated": %q,"currentTime": %q, "nodeEligible": %v}`, lastUpdated, now, eligible)
	} else {
		fmt.Fprintf(w, `{"lastUpdated": %q,"currentTime": %q}`, lastUpdated, now)
	}
	if h.OnResponse != nil {
		h.OnResponse(path, code)
	}
}
