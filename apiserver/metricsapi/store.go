// Package metricsapi serves the metrics.k8s.io/v1beta1 API (NodeMetrics
// and PodMetrics, what kubectl top reads) from the node agents' resource
// metrics, as metrics-server does: a scraper reads every node's
// /metrics/resource periodically, a store keeps the last two samples per
// node and turns the CPU counters into a rate over the window between
// them, and read-only REST storage answers from the store. It keeps
// nothing on disk and writes nothing through the API.
package metricsapi

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"portal.dev/portal/internal/resourcemetrics"
)

// Store holds the last two samples of each node. Its zero value is ready
// to use; it is safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	nodes map[string]*pair
}

// pair is a node's previous and latest sample.
type pair struct {
	prev, last resourcemetrics.Sample
	full       bool // prev holds a sample
}

// Add records node's newest sample.
func (s *Store) Add(node string, sample resourcemetrics.Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodes == nil {
		s.nodes = map[string]*pair{}
	}
	p := s.nodes[node]
	if p == nil {
		s.nodes[node] = &pair{last: sample}
		return
	}
	p.prev, p.last, p.full = p.last, sample, true
}

// Forget drops node's samples: a node that could not be scraped has no
// current figures, and old ones must not be served as if they were (nor
// a pod that has since moved to another node be listed from both).
func (s *Store) Forget(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, node)
}

// Retain forgets the nodes not in keep (deleted ones).
func (s *Store) Retain(keep map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.nodes {
		if !keep[n] {
			delete(s.nodes, n)
		}
	}
}

// Node is node's metrics, or false when two samples are not there yet
// (a rate needs a window) or the CPU counter went back (the node
// restarted).
func (s *Store) Node(node string) (*metricsv1beta1.NodeMetrics, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.nodes[node]
	if p == nil || !p.full {
		return nil, false
	}
	u, ok := rate(p.prev.Node, p.last.Node)
	if !ok {
		return nil, false
	}
	return &metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: node, CreationTimestamp: metav1.NewTime(time.Now())},
		Timestamp:  metav1.NewTime(p.last.Node.Time),
		Window:     metav1.Duration{Duration: p.last.Node.Time.Sub(p.prev.Node.Time)},
		Usage:      u,
	}, true
}

// NodePodMetrics is a pod's metrics and the node they were read from.
type NodePodMetrics struct {
	Node    string
	Metrics metricsv1beta1.PodMetrics
}

// Pods is the metrics of every pod that has two samples on its node, in
// namespace ns ("" for all). A pod name may come from more than one node
// (a pod recreated elsewhere under its old name); the caller keeps the
// one from the node the pod is bound to.
func (s *Store) Pods(ns string) []NodePodMetrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []NodePodMetrics
	for node, p := range s.nodes {
		if !p.full {
			continue
		}
		prev := map[[2]string]resourcemetrics.Pod{}
		for _, pod := range p.prev.Pods {
			prev[[2]string{pod.Namespace, pod.Name}] = pod
		}
		for _, pod := range p.last.Pods {
			if ns != "" && pod.Namespace != ns {
				continue
			}
			old, ok := prev[[2]string{pod.Namespace, pod.Name}]
			if !ok {
				continue
			}
			if m, ok := podMetrics(old, pod); ok {
				out = append(out, NodePodMetrics{Node: node, Metrics: m})
			}
		}
	}
	return out
}

// podMetrics is a pod's metrics from two samples of it: every container
// in the latest must have a rate, as metrics-server requires, so that a
// pod's sum is never short of a container that just restarted.
func podMetrics(old, cur resourcemetrics.Pod) (metricsv1beta1.PodMetrics, bool) {
	m := metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Namespace: cur.Namespace, Name: cur.Name, CreationTimestamp: metav1.NewTime(time.Now())},
	}
	prev := map[string]resourcemetrics.Usage{}
	for _, c := range old.Containers {
		prev[c.Name] = c.Usage
	}
	for _, c := range cur.Containers {
		p, ok := prev[c.Name]
		if !ok {
			return m, false
		}
		u, ok := rate(p, c.Usage)
		if !ok {
			return m, false
		}
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: u})
		if c.Time.After(m.Timestamp.Time) {
			m.Timestamp = metav1.NewTime(c.Time)
			m.Window = metav1.Duration{Duration: c.Time.Sub(p.Time)}
		}
	}
	if len(m.Containers) == 0 {
		return m, false
	}
	return m, true
}

// rate is the usage between two readings: CPU as the cores used on
// average over the window, memory as the latest working set. It fails on
// a window that is not positive or a counter that went back (a container
// that restarted since).
func rate(prev, last resourcemetrics.Usage) (corev1.ResourceList, bool) {
	window := last.Time.Sub(prev.Time)
	if window <= 0 || last.CPUSeconds < prev.CPUSeconds {
		return nil, false
	}
	cores := (last.CPUSeconds - prev.CPUSeconds) / window.Seconds()
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewScaledQuantity(int64(cores*1e9), resource.Nano),
		corev1.ResourceMemory: *resource.NewQuantity(int64(last.MemoryBytes), resource.BinarySI),
	}, true
}
