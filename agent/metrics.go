//go:build linux

package agent

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"portal.dev/portal/agent/cgroup"
	"portal.dev/portal/internal/resourcemetrics"
)

// serveResourceMetrics serves the node's, pods' and running containers'
// CPU and memory figures as kubelet's /metrics/resource does, read from
// their cgroups at the request. A figure that cannot be read is left out
// and scrape_error says so.
func (a *Agent) serveResourceMetrics(w http.ResponseWriter, r *http.Request) {
	s, failed := a.resourceSample(time.Now())
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if err := resourcemetrics.Write(w, s, failed); err != nil {
		klog.FromContext(r.Context()).V(2).Info("Write resource metrics", "err", err)
	}
}

// resourceSample reads the figures; failed says some could not be read.
func (a *Agent) resourceSample(now time.Time) (resourcemetrics.Sample, bool) {
	var s resourcemetrics.Sample
	failed := false
	var node cgroup.Stats
	var err error
	if a.cgroups != nil {
		node, err = a.cgroups.NodeStats("/proc")
	} else {
		node, err = cgroup.NodeStats("/proc")
	}
	if err != nil {
		failed = true
	}
	s.Node = usage(node, now)
	if a.cgroups == nil {
		return s, failed
	}
	a.mu.Lock()
	workers := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		workers = append(workers, w)
	}
	a.mu.Unlock()
	for _, w := range workers {
		pod, _ := w.get()
		w.mu.Lock()
		pt := w.targets
		w.mu.Unlock()
		if pod == nil || pt == nil || !pt.up {
			continue
		}
		ps, err := a.cgroups.PodStats(string(pod.UID))
		if err != nil {
			continue // no container has run yet
		}
		p := resourcemetrics.Pod{Namespace: pod.Namespace, Name: pod.Name, Usage: usage(ps, now)}
		for name := range pt.ctrs {
			cs, err := a.cgroups.ContainerStats(string(pod.UID), name)
			if err != nil {
				failed = true
				continue
			}
			p.Containers = append(p.Containers, resourcemetrics.Container{Name: name, Usage: usage(cs, now)})
		}
		slices.SortFunc(p.Containers, func(x, y resourcemetrics.Container) int { return strings.Compare(x.Name, y.Name) })
		s.Pods = append(s.Pods, p)
	}
	slices.SortFunc(s.Pods, func(x, y resourcemetrics.Pod) int {
		return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name)
	})
	return s, failed
}

func usage(s cgroup.Stats, now time.Time) resourcemetrics.Usage {
	return resourcemetrics.Usage{CPUSeconds: float64(s.CPUNanos) / 1e9, MemoryBytes: s.WorkingSetBytes, Time: now}
}
