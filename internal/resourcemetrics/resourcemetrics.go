// Package resourcemetrics is the text of a node's resource metrics, as
// kubelet serves them at /metrics/resource: cumulative CPU time and the
// memory working set of the node, each pod and each container, in the
// Prometheus text format. The node agent writes it; the API server's
// metrics scraper reads it. Pure data in, data out.
package resourcemetrics

import (
	"fmt"
	"io"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Usage is a figure pair at one moment.
type Usage struct {
	// CPUSeconds is the CPU time used so far, in core-seconds.
	CPUSeconds float64
	// MemoryBytes is the memory working set.
	MemoryBytes uint64
	// Time is when the figures were read.
	Time time.Time
}

// Container is one container's figures.
type Container struct {
	Name string
	Usage
}

// Pod is one pod's figures and its running containers'.
type Pod struct {
	Namespace, Name string
	Usage
	Containers []Container
}

// Sample is a node's figures at one scrape.
type Sample struct {
	Node Usage
	Pods []Pod
}

// The metric names kubelet's resource metrics endpoint serves.
const (
	nodeCPU      = "node_cpu_usage_seconds_total"
	nodeMemory   = "node_memory_working_set_bytes"
	podCPU       = "pod_cpu_usage_seconds_total"
	podMemory    = "pod_memory_working_set_bytes"
	ctrCPU       = "container_cpu_usage_seconds_total"
	ctrMemory    = "container_memory_working_set_bytes"
	scrapeErrors = "scrape_error"
)

var help = []struct{ name, kind, text string }{
	{ctrCPU, "counter", "Cumulative cpu time consumed by the container in core-seconds"},
	{ctrMemory, "gauge", "Current working set of the container in bytes"},
	{nodeCPU, "counter", "Cumulative cpu time consumed by the node in core-seconds"},
	{nodeMemory, "gauge", "Current working set of the node in bytes"},
	{podCPU, "counter", "Cumulative cpu time consumed by the pod in core-seconds"},
	{podMemory, "gauge", "Current working set of the pod in bytes"},
	{scrapeErrors, "gauge", "1 if there was an error while getting container metrics, 0 otherwise"},
}

// Write writes s in the Prometheus text format, each value with its
// timestamp in milliseconds. scrapeFailed sets scrape_error.
func Write(w io.Writer, s Sample, scrapeFailed bool) error {
	var b strings.Builder
	for _, h := range help {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", h.name, h.text, h.name, h.kind)
		switch h.name {
		case ctrCPU, ctrMemory:
			for _, p := range s.Pods {
				for _, c := range p.Containers {
					labels := fmt.Sprintf(`{container=%q,namespace=%q,pod=%q}`, c.Name, p.Namespace, p.Name)
					value(&b, h.name, labels, c.Usage)
				}
			}
		case podCPU, podMemory:
			for _, p := range s.Pods {
				value(&b, h.name, fmt.Sprintf(`{namespace=%q,pod=%q}`, p.Namespace, p.Name), p.Usage)
			}
		case nodeCPU, nodeMemory:
			value(&b, h.name, "", s.Node)
		case scrapeErrors:
			failed := 0
			if scrapeFailed {
				failed = 1
			}
			fmt.Fprintf(&b, "%s %d\n", scrapeErrors, failed)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func value(b *strings.Builder, name, labels string, u Usage) {
	v := fmt.Sprint(u.MemoryBytes)
	if strings.Contains(name, "cpu") {
		v = fmt.Sprintf("%.9f", u.CPUSeconds)
	}
	fmt.Fprintf(b, "%s%s %s %d\n", name, labels, v, u.Time.UnixMilli())
}

// Parse reads what Write wrote (or kubelet serves). A value without a
// timestamp is taken as read at now.
func Parse(r io.Reader, now time.Time) (Sample, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return Sample{}, fmt.Errorf("parse resource metrics: %w", err)
	}
	var s Sample
	pods := map[[2]string]*Pod{}
	var order [][2]string
	pod := func(m *dto.Metric) *Pod {
		key := [2]string{label(m, "namespace"), label(m, "pod")}
		p := pods[key]
		if p == nil {
			p = &Pod{Namespace: key[0], Name: key[1]}
			pods[key] = p
			order = append(order, key)
		}
		return p
	}
	for _, name := range []string{nodeCPU, nodeMemory, podCPU, podMemory, ctrCPU, ctrMemory} {
		f := families[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			var u *Usage
			switch name {
			case nodeCPU, nodeMemory:
				u = &s.Node
			case podCPU, podMemory:
				u = &pod(m).Usage
			default:
				u = containerUsage(pod(m), label(m, "container"))
			}
			set(u, name, m, now)
		}
	}
	for _, k := range order {
		s.Pods = append(s.Pods, *pods[k])
	}
	return s, nil
}

// containerUsage is the figures of p's container name, added when new.
func containerUsage(p *Pod, name string) *Usage {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i].Usage
		}
	}
	p.Containers = append(p.Containers, Container{Name: name})
	return &p.Containers[len(p.Containers)-1].Usage
}

func set(u *Usage, name string, m *dto.Metric, now time.Time) {
	var v float64
	if c := m.GetCounter(); c != nil {
		v = c.GetValue()
	} else if g := m.GetGauge(); g != nil {
		v = g.GetValue()
	} else if un := m.GetUntyped(); un != nil {
		v = un.GetValue()
	}
	if strings.Contains(name, "cpu") {
		u.CPUSeconds = v
	} else {
		u.MemoryBytes = uint64(v)
	}
	u.Time = now
	if m.TimestampMs != nil {
		u.Time = time.UnixMilli(m.GetTimestampMs())
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
