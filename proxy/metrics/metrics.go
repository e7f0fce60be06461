// Package metrics defines the proxy's Prometheus metrics, on a registry
// of their own (not the process-wide default), with kube-proxy's names
// where the meaning is the same so dashboards carry over. It only defines
// and serves them; the proxy core and modes record.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the proxy's metrics.
type Metrics struct {
	Registry *prometheus.Registry

	// SyncDuration and its full/partial split time Proxier.Sync.
	SyncDuration        prometheus.Histogram
	FullSyncDuration    prometheus.Histogram
	PartialSyncDuration prometheus.Histogram
	// NetworkProgrammingDuration runs from an EndpointSlice's
	// last-change-trigger-time to the end of the sync that programmed it.
	NetworkProgrammingDuration prometheus.Histogram
	LastSyncTimestamp          prometheus.Gauge
	LastQueuedTimestamp        prometheus.Gauge

	EndpointChangesPending prometheus.Gauge
	EndpointChangesTotal   prometheus.Counter
	ServiceChangesPending  prometheus.Gauge
	ServiceChangesTotal    prometheus.Counter

	// SyncFailures counts failed syncs by mode; NFTablesSyncFailures is
	// kube-proxy's name for the nftables mode's.
	SyncFailures         *prometheus.CounterVec
	NFTablesSyncFailures prometheus.Counter

	ConntrackDeleted prometheus.Counter
	HealthzTotal     *prometheus.CounterVec
	LivezTotal       *prometheus.CounterVec
}

// New returns the metrics, registered on a fresh registry together with
// the Go runtime and process collectors.
func New() *Metrics {
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		SyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds", Buckets: syncBuckets,
		}),
		FullSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_full_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: syncBuckets,
		}),
		PartialSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_partial_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: syncBuckets,
		}),
		NetworkProgrammingDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_network_programming_duration_seconds", Help: "In Cluster Network Programming Latency in seconds",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 0.75, 1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300},
		}),
		LastSyncTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds", Help: "The last time proxy rules were successfully synced",
		}),
		LastQueuedTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", Help: "The last time a sync of proxy rules was queued",
		}),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_endpoint_changes_pending", Help: "Pending proxy rules Endpoint changes",
		}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_endpoint_changes_total", Help: "Cumulative proxy rules Endpoint changes",
		}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_service_changes_pending", Help: "Pending proxy rules Service changes",
		}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_service_changes_total", Help: "Cumulative proxy rules Service changes",
		}),
		SyncFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portal_proxy_sync_failures_total", Help: "Failed syncs of the proxy's data plane, by mode",
		}, []string{"mode"}),
		NFTablesSyncFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_nftables_sync_failures_total", Help: "Cumulative proxy nftables sync failures",
		}),
		ConntrackDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_conntrack_reconciler_deleted_entries_total", Help: "Cumulative conntrack flows deleted by the proxy",
		}),
		HealthzTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_proxy_healthz_total", Help: "Cumulative proxy healthz HTTP status",
		}, []string{"code"}),
		LivezTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_proxy_livez_total", Help: "Cumulative proxy livez HTTP status",
		}, []string{"code"}),
	}
	m.Registry.MustRegister(
		m.SyncDuration, m.FullSyncDuration, m.PartialSyncDuration, m.NetworkProgrammingDuration,
		m.LastSyncTimestamp, m.LastQueuedTimestamp,
		m.EndpointChangesPending, m.EndpointChangesTotal, m.ServiceChangesPending, m.ServiceChangesTotal,
		m.SyncFailures, m.NFTablesSyncFailures, m.ConntrackDeleted, m.HealthzTotal, m.LivezTotal,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
