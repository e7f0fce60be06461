package ingress

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/ingress/route"
)

// Metrics are the controller's Prometheus metrics, in a registry of its
// own. Requests are labelled by the matched rule (Ingress, host and path
// as written), never by the request's own host or path, so a scan of
// random URLs cannot grow the series without bound.
type Metrics struct {
	// Registry holds every metric below.
	Registry *prometheus.Registry

	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	connectErrors   *prometheus.CounterVec
	configTimestamp prometheus.Gauge
	configsApplied  prometheus.Counter
	// backends counts by backend Service, for /status/backends.
	backends backendCounters
	// series holds the series a request counts in, by rule, method and
	// status class (seriesKey -> *requestSeries): the vectors' own
	// lookup hashes and compares every label value under a lock, and
	// the Ingress's name is made a string, for each request. It holds
	// no more series than the vectors, which forget none either.
	series sync.Map
}

type seriesKey struct {
	ingress       types.NamespacedName
	host, path    string
	method, class string
}

// requestSeries are the series of one seriesKey.
type requestSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// NewMetrics returns the metrics, registered.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "portal", Subsystem: "ingress", Name: "requests_total",
			Help: "Requests by Ingress, rule host and path, method and status class (2xx...); 404s that matched no rule have an empty ingress.",
		}, []string{"ingress", "host", "path", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "portal", Subsystem: "ingress", Name: "request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its response, by Ingress.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"ingress"}),
		connectErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "portal", Subsystem: "ingress", Name: "upstream_connect_errors_total",
			Help: "Failed connections to endpoints, by backend Service and port.",
		}, []string{"service", "port"}),
		configTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "portal", Subsystem: "ingress", Name: "config_last_applied_timestamp_seconds",
			Help: "When the routing table being served was built, in seconds since the epoch.",
		}),
		configsApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "portal", Subsystem: "ingress", Name: "configs_applied_total",
			Help: "Routing tables applied since the start.",
		}),
	}
	m.Registry.MustRegister(m.requests, m.duration, m.connectErrors, m.configTimestamp, m.configsApplied,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry's metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// Applied records that a Table built at built is now served.
func (m *Metrics) Applied(built time.Time) {
	m.configsApplied.Inc()
	if !built.IsZero() {
		m.configTimestamp.Set(float64(built.UnixNano()) / 1e9)
	}
}

// request counts a request routed to match that was answered status
// after d. last, when not nil, is the series of the request before on
// the same client connection, looked at first and updated.
func (m *Metrics) request(match route.Match, method string, status int, d time.Duration, last *lastSeries) {
	k := seriesKey{host: match.Host, path: match.Path, method: methodLabel(method), class: statusClass(status)}
	if match.Backend != nil {
		k.ingress = match.Ingress
		m.backendCounter(match.Backend.Service, last).count(status)
	}
	var s *requestSeries
	if last != nil && last.series != nil && last.key == k {
		s = last.series
	} else {
		v, ok := m.series.Load(k)
		if !ok {
			v, _ = m.series.LoadOrStore(k, m.newSeries(k))
		}
		s = v.(*requestSeries)
		if last != nil {
			last.key, last.series = k, s
		}
	}
	s.requests.Inc()
	s.duration.Observe(d.Seconds())
}

// lastSeries is the series a client connection's last request counted
// in, and the counter of its backend Service. Its next requests mostly
// count in the same, which a comparison of their keys finds without the
// lookups' hashing of every label value and of the Service's name.
type lastSeries struct {
	key     seriesKey
	series  *requestSeries
	service types.NamespacedName
	counter *backendCounter
}

// backendCounter is svc's counter, the one of last when that is svc's.
func (m *Metrics) backendCounter(svc types.NamespacedName, last *lastSeries) *backendCounter {
	if last != nil && last.counter != nil && last.service == svc {
		return last.counter
	}
	c := m.backends.counter(svc)
	if last != nil {
		last.service, last.counter = svc, c
	}
	return c
}

// newSeries looks up the series of k in the vectors.
func (m *Metrics) newSeries(k seriesKey) *requestSeries {
	ingress := ""
	if k.ingress != (types.NamespacedName{}) {
		ingress = k.ingress.String()
	}
	return &requestSeries{
		requests: m.requests.WithLabelValues(ingress, k.host, k.path, k.method, k.class),
		duration: m.duration.WithLabelValues(ingress),
	}
}

func (m *Metrics) upstreamConnectError(b *route.Backend) {
	m.connectErrors.WithLabelValues(b.Service.String(), b.Port).Inc()
}

// methodLabel keeps the method label bounded: a client may send any
// token as a method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "OTHER"
}

func statusClass(code int) string {
	switch {
	case code < 100 || code > 599:
		return "other"
	case code < 200:
		return "1xx"
	case code < 300:
		return "2xx"
	case code < 400:
		return "3xx"
	case code < 500:
		return "4xx"
	}
	return "5xx"
}
