package podgc

import "github.com/prometheus/client_golang/prometheus"

// metrics are upstream's pod GC series: deletions and failed deletions by
// namespace and reason.
type metrics struct {
	deleted, failed *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "pod_gc_collector",
			Name:      "force_delete_pods_total",
			Help:      "Pods the pod garbage collector deleted, by namespace and reason.",
		}, []string{"namespace", "reason"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "pod_gc_collector",
			Name:      "force_delete_pod_errors_total",
			Help:      "Pod deletions by the pod garbage collector that failed, by namespace and reason.",
		}, []string{"namespace", "reason"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.deleted, m.failed}
}
