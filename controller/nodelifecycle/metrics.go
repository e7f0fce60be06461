package nodelifecycle

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

const metricsSubsystem = "node_lifecycle_controller"

// metrics are the controller's Prometheus collectors.
type metrics struct {
	nodes      *prometheus.GaugeVec
	podsMarked prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: metricsSubsystem,
			Name:      "nodes",
			Help:      "Number of Nodes by the status of their Ready condition (True, False, Unknown).",
		}, []string{"status"}),
		podsMarked: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: metricsSubsystem,
			Name:      "pods_marked_not_ready_total",
			Help:      "Number of Pods whose Ready condition was set False because their Node went quiet.",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.nodes, m.podsMarked}
}

func (m *metrics) setNodes(byStatus map[corev1.ConditionStatus]int) {
	for _, s := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown} {
		m.nodes.WithLabelValues(string(s)).Set(float64(byStatus[s]))
	}
}
