package explain

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// CheckService diagnoses a Service from objects already in hand, with no
// I/O: the Service itself and its load-balancer status, the selector, the
// endpoints (readiness, targetPort on the container), the traffic policy
// and the Ingresses pointing at it. The browser view calls it on informer
// caches for every Service, so it stays linear in the objects given.
func CheckService(svc *corev1.Service, in Objects) []Step {
	steps := []Step{serviceStep(svc)}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return append(steps, ingressSteps(svc, in.Ingresses, in.IngressAnswers)...)
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		steps = append(steps, loadBalancerStep(svc))
	}
	pods := selected(svc, in.Pods)
	if svc.Spec.Selector != nil {
		steps = append(steps, selectorStep(svc, pods, in.Pods))
	}
	steps = append(steps, endpointsStep(svc, pods, in))
	if s, ok := trafficPolicyStep(svc, in.Slices, in.Nodes); ok {
		steps = append(steps, s)
	}
	return append(steps, ingressSteps(svc, in.Ingresses, in.IngressAnswers)...)
}

// serviceStep describes the Service's type, IPs and ports.
func serviceStep(svc *corev1.Service) Step {
	st := Step{Name: "service", Status: StatusOK}
	switch svc.Spec.Type {
	case corev1.ServiceTypeExternalName:
		st.Message = fmt.Sprintf("ExternalName %s, an alias in DNS only", clean(svc.Spec.ExternalName))
		return st
	case "":
		svc = svc.DeepCopy()
		svc.Spec.Type = corev1.ServiceTypeClusterIP
	}
	ips := strings.Join(svc.Spec.ClusterIPs, ",")
	if ips == "" {
		ips = svc.Spec.ClusterIP
	}
	if ips == corev1.ClusterIPNone {
		ips = "None (headless)"
	}
	st.Message = fmt.Sprintf("%s %s, ports %s", svc.Spec.Type, ips, portsString(svc.Spec.Ports))
	if len(svc.Spec.Ports) == 0 && ips != "None (headless)" {
		st.Status, st.Message = StatusBroken, st.Message+": the Service has no ports"
	}
	if len(svc.Spec.ExternalIPs) > 0 {
		st.Evidence = append(st.Evidence, "externalIPs "+strings.Join(svc.Spec.ExternalIPs, ","))
	}
	return st
}

// portsString renders Service ports as kubectl does: 80:30080/TCP.
func portsString(ports []corev1.ServicePort) string {
	var out []string
	for _, p := range ports {
		s := fmt.Sprint(p.Port)
		if p.NodePort != 0 {
			s += fmt.Sprintf(":%d", p.NodePort)
		}
		s += "/" + string(p.Protocol)
		if p.Name != "" {
			s = p.Name + " " + s
		}
		s += "->" + p.TargetPort.String()
		out = append(out, s)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// lbConditionType is the condition servicelb writes on the Services it
// serves (controller/servicelb.ConditionAllocated); explain reads it
// rather than importing the controller.
const lbConditionType = "portal.dev/LoadBalancerIPAllocated"

// loadBalancerStep says whether a LoadBalancer Service got its addresses,
// and when not, why (no pool, pool exhausted), from servicelb's condition.
func loadBalancerStep(svc *corev1.Service) Step {
	st := Step{Name: "loadbalancer"}
	var ips []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP+in.Hostname)
	}
	var cond string
	for _, c := range svc.Status.Conditions {
		if c.Type == lbConditionType {
			cond = fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, clean(c.Message))
			if c.Status != "True" {
				st.Status = StatusBroken
				st.Message = fmt.Sprintf("pending: %s (%s)", clean(c.Message), c.Reason)
			}
		}
	}
	if cond != "" {
		st.Evidence = append(st.Evidence, cond)
	}
	switch {
	case st.Status == StatusBroken:
	case len(ips) > 0:
		st.Status, st.Message = StatusOK, "load balancer at "+strings.Join(ips, ",")
	case svc.Spec.LoadBalancerClass != nil:
		st.Status = StatusWarning
		st.Message = fmt.Sprintf("pending: no address yet from the controller of class %s", *svc.Spec.LoadBalancerClass)
	default:
		st.Status, st.Message = StatusBroken, "pending: no load balancer address assigned and no controller said why"
	}
	return st
}

// selected returns the pods of the Service's namespace its selector
// matches (none for a Service without a selector).
func selected(svc *corev1.Service, pods []*corev1.Pod) []*corev1.Pod {
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Namespace == svc.Namespace && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// selectorStep counts the pods the selector matches; when none, it shows
// the pods that miss by the fewest labels and which label differs.
func selectorStep(svc *corev1.Service, matched, pods []*corev1.Pod) Step {
	sel := labels.SelectorFromSet(svc.Spec.Selector).String()
	if len(matched) > 0 {
		return Step{Name: "selector", Status: StatusOK, Message: fmt.Sprintf("%s matches %d pod(s)", sel, len(matched))}
	}
	st := Step{Name: "selector", Status: StatusBroken, Message: fmt.Sprintf("%s matches no pod", sel)}
	near := nearestPods(svc.Spec.Selector, svc.Namespace, pods, 3)
	if len(near) > 0 {
		st.Message += "; nearest: " + near[0].summary
	}
	for _, n := range near {
		st.Evidence = append(st.Evidence, "pod "+n.pod.Name+": "+n.summary)
	}
	return st
}

// nearPod is a pod that misses a selector, and how.
type nearPod struct {
	pod     *corev1.Pod
	misses  int
	dist    int // edits between the pod's values and the selector's
	summary string
}

// nearestPods returns up to n pods of namespace ns that miss the selector
// by the fewest labels, each with the labels that differ. Pods that share
// no label key with the selector are not near.
func nearestPods(selector map[string]string, ns string, pods []*corev1.Pod, n int) []nearPod {
	keys := make([]string, 0, len(selector))
	for k := range selector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []nearPod
	for _, p := range pods {
		if p.Namespace != ns {
			continue
		}
		var diffs []string
		shared, dist := 0, 0
		for _, k := range keys {
			v, ok := p.Labels[k]
			switch {
			case !ok:
				dist += len(selector[k]) + 1
				diffs = append(diffs, fmt.Sprintf("label %s missing (selector wants %s=%s)", k, k, selector[k]))
			case v != selector[k]:
				shared++
				dist += editDistance(v, selector[k])
				diffs = append(diffs, fmt.Sprintf("label %s=%s, selector wants %s=%s", k, clean(v), k, selector[k]))
			default:
				shared++
			}
		}
		if shared == 0 && !sameValueOtherKey(selector, p.Labels, &diffs) {
			continue
		}
		out = append(out, nearPod{pod: p, misses: len(diffs), dist: dist, summary: strings.Join(diffs, "; ")})
	}
	slices.SortStableFunc(out, func(a, b nearPod) int {
		if a.misses != b.misses {
			return a.misses - b.misses
		}
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.pod.Name, b.pod.Name)
	})
	return out[:min(n, len(out))]
}

// sameValueOtherKey notes a pod label that has a selector's value under
// another key (app=web against name=web), a common slip.
func sameValueOtherKey(selector, podLabels map[string]string, diffs *[]string) bool {
	found := false
	for k, v := range selector {
		for pk, pv := range podLabels {
			if pv == v && pk != k {
				*diffs = append(*diffs, fmt.Sprintf("pod has %s=%s where the selector wants %s=%s", clean(pk), clean(pv), k, v))
				found = true
			}
		}
	}
	return found
}

// endpointsStep judges the endpoints of the Service: ready, serving or
// terminating, the readiness failures, and whether each port's targetPort
// exists on the selected pods' containers.
func endpointsStep(svc *corev1.Service, pods []*corev1.Pod, in Objects) Step {
	st := Step{Name: "endpoints"}
	eps := sliceEndpoints(svc, in.Slices)
	ready, notReady := 0, 0
	for _, e := range eps {
		if e.ready {
			ready++
		} else {
			notReady++
		}
		st.Evidence = append(st.Evidence, e.String())
	}
	if missing := missingTargetPorts(svc, pods); len(missing) > 0 {
		st.Status = StatusBroken
		st.Message = missing[0]
		st.Evidence = append(missing[1:], st.Evidence...)
		return st
	}
	switch {
	case ready > 0:
		st.Status, st.Message = StatusOK, fmt.Sprintf("%d ready endpoint(s)", ready)
		if notReady > 0 {
			st.Status, st.Message = StatusWarning, fmt.Sprintf("%d ready, %d not ready", ready, notReady)
		}
	case notReady > 0:
		st.Status = StatusBroken
		st.Message = fmt.Sprintf("no ready endpoint: all %d endpoint(s) not ready", notReady)
		if why := readinessFailures(pods, in.Events); len(why) > 0 {
			st.Message += "; " + why[0]
			st.Evidence = append(st.Evidence, why...)
		}
	case len(svc.Spec.Selector) == 0:
		st.Status, st.Message = StatusBroken, "no endpoints: the Service has no selector and no EndpointSlice was written for it"
	default:
		st.Status, st.Message = StatusBroken, "no endpoints"
		if len(pods) > 0 {
			st.Message = fmt.Sprintf("no endpoints although %d pod(s) match: not running or not yet ready", len(pods))
			st.Evidence = append(st.Evidence, readinessFailures(pods, in.Events)...)
		}
	}
	return st
}

// trafficPolicyStep reports, for a Service with externalTrafficPolicy
// Local that takes external traffic, the nodes without a local ready
// endpoint: traffic reaching them on the NodePort or load balancer
// address is dropped there rather than forwarded. ok is false when the
// policy does not apply.
func trafficPolicyStep(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, nodes []*corev1.Node) (Step, bool) {
	external := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	if !external || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		return Step{}, false
	}
	without := nodesWithoutLocal(svc, slices, nodes)
	st := Step{Name: "traffic-policy", Status: StatusOK, Message: "externalTrafficPolicy Local: every node has a local ready endpoint"}
	if len(without) > 0 {
		st.Status = StatusWarning
		st.Message = fmt.Sprintf("externalTrafficPolicy Local: %s %s no local ready endpoint and drop%s external traffic to this Service",
			strings.Join(firstN(without, 5), ", "), plural(len(without), "has", "have"), plural(len(without), "s", ""))
		if len(without) == len(nodes) {
			st.Status = StatusBroken
		}
	}
	if svc.Spec.HealthCheckNodePort != 0 {
		st.Evidence = append(st.Evidence, fmt.Sprintf("healthCheckNodePort %d answers 503 on those nodes, so load balancers skip them", svc.Spec.HealthCheckNodePort))
	}
	return st, true
}

// nodesWithoutLocal lists the nodes that hold no ready endpoint of svc.
func nodesWithoutLocal(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, nodes []*corev1.Node) []string {
	local := map[string]bool{}
	for _, e := range sliceEndpoints(svc, slices) {
		if e.ready && e.node != "" {
			local[e.node] = true
		}
	}
	var out []string
	for _, n := range nodes {
		if !local[n.Name] {
			out = append(out, n.Name)
		}
	}
	return out
}

// hasLocalEndpoint says whether node holds a ready endpoint of svc.
func hasLocalEndpoint(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, node string) bool {
	for _, e := range sliceEndpoints(svc, slices) {
		if e.ready && e.node == node {
			return true
		}
	}
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
