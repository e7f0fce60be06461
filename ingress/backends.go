package ingress

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
)

// BackendCounts is what the controller counted for one backend Service
// since it started: the requests it routed there and the responses among
// them with a 5xx status (the backend's own, or the controller's 502 and
// 504 when it could not reach one).
type BackendCounts struct {
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
}

// BackendTraffic is the JSON of the metrics address's /status/backends:
// BackendCounts by backend Service, "namespace/name". The Prometheus
// metrics count by Ingress rule; the service map wants them by Service.
type BackendTraffic struct {
	Services map[string]BackendCounts `json:"services"`
}

// backendCounter counts one backend Service's requests; atomics, so that
// counting a request takes no lock once its Service has been seen.
type backendCounter struct {
	requests, errors atomic.Uint64
}

// backendCounters counts requests per backend Service; its zero value is
// ready. Only Services an Ingress routed a request to appear, so it grows
// no further than the Services Ingresses name.
type backendCounters struct {
	m sync.Map // types.NamespacedName -> *backendCounter
}

// counter returns svc's counter, made at its first request.
func (b *backendCounters) counter(svc types.NamespacedName) *backendCounter {
	v, ok := b.m.Load(svc)
	if !ok {
		v, _ = b.m.LoadOrStore(svc, &backendCounter{})
	}
	return v.(*backendCounter)
}

// count counts a request answered with status.
func (c *backendCounter) count(status int) {
	c.requests.Add(1)
	if status >= 500 && status <= 599 {
		c.errors.Add(1)
	}
}

// snapshot returns the counts of every backend Service seen.
func (b *backendCounters) snapshot() BackendTraffic {
	out := BackendTraffic{Services: map[string]BackendCounts{}}
	b.m.Range(func(k, v any) bool {
		c := v.(*backendCounter)
		out.Services[k.(types.NamespacedName).String()] = BackendCounts{Requests: c.requests.Load(), Errors: c.errors.Load()}
		return true
	})
	return out
}

// Backends returns the requests and 5xx responses counted per backend
// Service.
func (m *Metrics) Backends() BackendTraffic { return m.backends.snapshot() }

// serveBackends answers GET /status/backends with Backends as JSON.
func (m *Metrics) serveBackends(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(m.Backends())
}
