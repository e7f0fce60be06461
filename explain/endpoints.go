package explain

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// endpoint is one address of a Service's EndpointSlices with its
// conditions and the ports it serves.
type endpoint struct {
	addr                         string
	ports                        []int32
	node, pod                    string
	ready, serving, terminating  bool
	slice, sliceRV, sliceTrigger string
}

// String renders the endpoint as one evidence line.
func (e endpoint) String() string {
	var ports []string
	for _, p := range e.ports {
		ports = append(ports, fmt.Sprint(p))
	}
	s := fmt.Sprintf("%s port %s ready=%t serving=%t terminating=%t", e.addr, strings.Join(ports, ","), e.ready, e.serving, e.terminating)
	if e.pod != "" {
		s += " pod " + e.pod
	}
	if e.node != "" {
		s += " on " + e.node
	}
	return s
}

// sliceEndpoints merges the Service's EndpointSlices into one list of
// addresses, sorted, each counted once.
func sliceEndpoints(svc *corev1.Service, list []*discoveryv1.EndpointSlice) []endpoint {
	byAddr := map[string]*endpoint{}
	for _, s := range list {
		if s.Namespace != svc.Namespace || s.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		var ports []int32
		for _, p := range s.Ports {
			if p.Port != nil {
				ports = append(ports, *p.Port)
			}
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			ep := byAddr[e.Addresses[0]]
			if ep == nil {
				ep = &endpoint{addr: e.Addresses[0], slice: s.Name, sliceRV: s.ResourceVersion,
					sliceTrigger: s.Annotations[corev1.EndpointsLastChangeTriggerTime]}
				byAddr[e.Addresses[0]] = ep
			}
			ep.ports = append(ep.ports, ports...)
			ep.ready = e.Conditions.Ready == nil || *e.Conditions.Ready
			ep.serving = (e.Conditions.Serving == nil && ep.ready) || (e.Conditions.Serving != nil && *e.Conditions.Serving)
			ep.terminating = e.Conditions.Terminating != nil && *e.Conditions.Terminating
			if e.NodeName != nil {
				ep.node = *e.NodeName
			}
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
				ep.pod = e.TargetRef.Name
			}
		}
	}
	out := make([]endpoint, 0, len(byAddr))
	for _, e := range byAddr {
		slices.Sort(e.ports)
		e.ports = slices.Compact(e.ports)
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b endpoint) int { return strings.Compare(a.addr, b.addr) })
	return out
}

// missingTargetPorts lists, for each Service port whose targetPort is a
// name, the selected pods none of whose containers declare that name: the
// endpoint controllers leave such pods out of that port.
func missingTargetPorts(svc *corev1.Service, pods []*corev1.Pod) []string {
	var out []string
	for _, sp := range svc.Spec.Ports {
		if sp.TargetPort.Type != intstr.String {
			continue
		}
		name := sp.TargetPort.StrVal
		var without []string
		var have []string
		for _, p := range pods {
			if _, ok := containerPort(p, name); !ok {
				without = append(without, p.Name)
				have = append(have, declaredPorts(p)...)
			}
		}
		if len(without) == 0 {
			continue
		}
		slices.Sort(have)
		have = slices.Compact(have)
		declared := "none"
		if len(have) > 0 {
			declared = strings.Join(have, ", ")
		}
		out = append(out, fmt.Sprintf("targetPort %q of port %d: no container of %d selected pod(s) has a port named %q (declared: %s)",
			name, sp.Port, len(without), name, declared))
		out = append(out, fmt.Sprintf("pods without port %q: %s", name, strings.Join(firstN(without, 5), ", ")))
	}
	return out
}

// containerPort finds the container port named name on the pod.
func containerPort(p *corev1.Pod, name string) (corev1.ContainerPort, bool) {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == name {
				return cp, true
			}
		}
	}
	return corev1.ContainerPort{}, false
}

// declaredPorts lists the pod's named container ports as name=number.
func declaredPorts(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name != "" {
				out = append(out, fmt.Sprintf("%s=%d", clean(cp.Name), cp.ContainerPort))
			} else {
				out = append(out, fmt.Sprint(cp.ContainerPort))
			}
		}
	}
	return out
}

// readinessFailures says why the pods are not ready: the readiness
// probe's last failure (from the Unhealthy event when there is one), or
// the pod's Ready condition, or its phase.
func readinessFailures(pods []*corev1.Pod, events []*corev1.Event) []string {
	last := lastProbeFailures(events)
	var out []string
	for _, p := range pods {
		if podIsReady(p) {
			continue
		}
		if msg, ok := last[p.Namespace+"/"+p.Name]; ok {
			out = append(out, fmt.Sprintf("pod %s: %s", p.Name, msg))
			continue
		}
		why := "phase " + string(p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Message != "" {
				why = clean(c.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				why += fmt.Sprintf("; container %s waiting: %s %s", cs.Name, w.Reason, clean(w.Message))
			}
		}
		out = append(out, fmt.Sprintf("pod %s not ready: %s", p.Name, why))
	}
	return out
}

// lastProbeFailures maps namespace/pod to the newest readiness probe
// failure among events (the agent's and kubelet's Unhealthy events).
func lastProbeFailures(events []*corev1.Event) map[string]string {
	out := map[string]string{}
	newest := map[string]int64{}
	for _, ev := range events {
		if ev.Reason != "Unhealthy" || ev.InvolvedObject.Kind != "Pod" || !strings.HasPrefix(ev.Message, "Readiness probe") {
			continue
		}
		key := ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
		t := ev.LastTimestamp.Unix()
		if ev.EventTime.Unix() > t {
			t = ev.EventTime.Unix()
		}
		if _, seen := out[key]; !seen || t >= newest[key] {
			out[key], newest[key] = clean(ev.Message), t
		}
	}
	return out
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
