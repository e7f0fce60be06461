package replicaset

import "github.com/prometheus/client_golang/prometheus"

// newMetrics returns the controller's Prometheus collectors.
func newMetrics(queueLen func() int) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Subsystem: "replicaset_controller",
			Name:      "queue_depth",
			Help:      "ReplicaSets waiting in the replicaset controller's queue.",
		}, func() float64 { return float64(queueLen()) }),
	}
}
