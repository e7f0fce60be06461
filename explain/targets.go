package explain

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// explainAddress finds what answers at target, "IP", "IP:PORT", "HOST" or
// "HOST:PORT", and explains that.
//
// A HOST that reads as a Service's DNS name (NAME.NS, NAME.NS.svc,
// NAME.NS.svc.DOMAIN) explains that Service; when NS has no such Service
// but other namespaces do, the report says the name was asked in the
// wrong namespace and which name would answer. Any other HOST is looked
// for among the Ingresses' hosts.
func (e *Explainer) explainAddress(ctx context.Context, namespace, target string) (*Report, error) {
	host, portStr, err := splitHostPortOpt(target)
	if err != nil {
		return nil, fmt.Errorf("explain %q: %w", target, err)
	}
	var port int32
	if portStr != "" {
		p, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("explain %q: port %q is not a number", target, portStr)
		}
		port = int32(p)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return e.explainIP(ctx, target, ip.Unmap(), port)
	}
	if name, ns, ok := e.serviceDNSName(host); ok {
		return e.explainServiceName(ctx, target, name, ns)
	}
	return e.explainHost(ctx, namespace, target, host)
}

// splitHostPortOpt splits "host:port", "[v6]:port", "v6", "host".
func splitHostPortOpt(s string) (string, string, error) {
	if strings.HasPrefix(s, "[") {
		host, port, ok := strings.Cut(strings.TrimPrefix(s, "["), "]")
		if !ok {
			return "", "", fmt.Errorf("missing ]")
		}
		return host, strings.TrimPrefix(port, ":"), nil
	}
	if strings.Count(s, ":") == 1 {
		host, port, _ := strings.Cut(s, ":")
		return host, port, nil
	}
	return s, "", nil
}

// serviceDNSName reads host as a Service name: NAME.NS[.svc[.DOMAIN]].
func (e *Explainer) serviceDNSName(host string) (name, ns string, ok bool) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	h = strings.TrimSuffix(h, "."+e.cfg.ClusterDomain)
	h = strings.TrimSuffix(h, ".svc")
	parts := strings.Split(h, ".")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// explainServiceName explains the Service a DNS name names, and when it
// does not exist, asks the DNS what it answers and finds the namespaces
// where the name does exist.
func (e *Explainer) explainServiceName(ctx context.Context, target, name, ns string) (*Report, error) {
	_, err := e.cfg.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		r, err := e.explainService(ctx, ns, name, hit{})
		if r != nil {
			r.Target = target + " (svc/" + ns + "/" + name + ")"
		}
		return r, err
	}
	fqdn := fmt.Sprintf("%s.%s.svc.%s", name, ns, e.cfg.ClusterDomain)
	st := Step{Name: "dns", Status: StatusBroken, Message: fmt.Sprintf("%s does not exist: there is no Service %s in namespace %s", fqdn, name, ns)}
	if r, server, err := e.cfg.DNS.Query(ctx, fqdn, dnsTypeA); err == nil {
		st.Evidence = append(st.Evidence, fmt.Sprintf("asked %s: %s A -> %s %s", server, fqdn, rcodeName(r.Rcode), answers(r)))
	}
	if other := e.sameNameElsewhere(ctx, ns, name); len(other) > 0 {
		var names []string
		for _, o := range other {
			names = append(names, name+"."+o)
		}
		st.Message = fmt.Sprintf("%s asked in the wrong namespace: there is no Service %s in namespace %s, but there is in %s; ask for %s",
			name+"."+ns, name, ns, strings.Join(other, ", "), strings.Join(names, " or "))
	}
	return newReport(target, []Step{st}), nil
}

// explainHost looks for host among the Ingresses' rules (all namespaces
// the caller may list; namespace first).
func (e *Explainer) explainHost(ctx context.Context, namespace, target, host string) (*Report, error) {
	list, err := e.cfg.Client.NetworkingV1().Ingresses("").List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		list, err = e.cfg.Client.NetworkingV1().Ingresses(namespace).List(ctx, metav1.ListOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("list ingresses: %w", err)
	}
	for i := range list.Items {
		ing := &list.Items[i]
		for _, r := range ing.Spec.Rules {
			if hostMatches(r.Host, host) {
				rep, err := e.explainIngress(ctx, ing.Namespace, ing.Name)
				if rep != nil {
					rep.Target = target + " (ingress/" + ing.Namespace + "/" + ing.Name + ")"
				}
				return rep, err
			}
		}
	}
	return newReport(target, []Step{{Name: "target", Status: StatusBroken,
		Message: fmt.Sprintf("nothing in the cluster answers to %s: no Ingress has that host, and it is no Service name (NAME.NAMESPACE)", clean(host))}}), nil
}

// hostMatches matches an Ingress rule host (exact or *.wildcard) to host.
func hostMatches(rule, host string) bool {
	rule, host = strings.ToLower(rule), strings.ToLower(host)
	if suffix, ok := strings.CutPrefix(rule, "*."); ok {
		first, rest, found := strings.Cut(host, ".")
		return found && first != "" && rest == suffix
	}
	return rule != "" && rule == host
}

// explainIP finds the Service (cluster IP, load balancer IP, external IP,
// a node's address with a NodePort) or the pod at ip.
func (e *Explainer) explainIP(ctx context.Context, target string, ip netip.Addr, port int32) (*Report, error) {
	c := e.cfg.Client.CoreV1()
	svcs, err := c.Services("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.clusterIP", ip.String()).String()})
	if err != nil {
		return nil, fmt.Errorf("find the Service at %s: %w", ip, err)
	}
	// The field selector narrows the list on the server; the check here
	// keeps the answer right where a server (or a fake) ignores it.
	for i := range svcs.Items {
		if s := &svcs.Items[i]; slices.Contains(s.Spec.ClusterIPs, ip.String()) {
			return e.serviceAt(ctx, target, s, port, hit{via: "cluster IP " + target})
		}
	}
	if r, found, err := e.externalAt(ctx, target, ip, port); found || err != nil {
		return r, err
	}
	pods, err := c.Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("status.podIP", ip.String()).String()})
	if err != nil {
		return nil, fmt.Errorf("find the pod at %s: %w", ip, err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP != ip.String() {
			continue
		}
		r, err := e.explainPod(ctx, p.Namespace, p.Name)
		if r != nil {
			r.Target = target + " (" + r.Target + ")"
		}
		return r, err
	}
	return newReport(target, []Step{{Name: "target", Status: StatusBroken,
		Message: fmt.Sprintf("nothing the API knows answers at %s: no Service cluster IP, load balancer or external IP, node address or pod has it", ip)}}), nil
}

// externalAt finds a Service reached at ip from outside: a load balancer
// IP, an external IP, or a node's address with the Service's NodePort.
func (e *Explainer) externalAt(ctx context.Context, target string, ip netip.Addr, port int32) (*Report, bool, error) {
	c := e.cfg.Client.CoreV1()
	nodes, err := c.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("list nodes: %w", err)
	}
	node := ""
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Address == ip.String() {
				node = n.Name
			}
		}
	}
	var types []corev1.ServiceType
	if node != "" {
		types = []corev1.ServiceType{corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer}
	} else {
		types = []corev1.ServiceType{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort}
	}
	for _, t := range types {
		list, err := c.Services("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.type", string(t)).String()})
		if err != nil {
			return nil, false, fmt.Errorf("list %s Services: %w", t, err)
		}
		for i := range list.Items {
			s := &list.Items[i]
			if s.Spec.Type != t {
				continue
			}
			if node != "" {
				for _, p := range s.Spec.Ports {
					if p.NodePort == port && port != 0 {
						r, err := e.serviceAt(ctx, target, s, p.Port, hit{node: node, port: port, via: fmt.Sprintf("NodePort %d on node %s", port, node)})
						return r, true, err
					}
				}
				continue
			}
			if hasExternalIP(s, ip.String()) {
				r, err := e.serviceAt(ctx, target, s, port, hit{via: "load balancer or external IP " + target})
				return r, true, err
			}
		}
	}
	if node != "" {
		return newReport(target, []Step{{Name: "target", Status: StatusBroken,
			Message: fmt.Sprintf("%s is node %s, and no Service has NodePort %d", ip, node, port)}}), true, nil
	}
	return nil, false, nil
}

func hasExternalIP(s *corev1.Service, ip string) bool {
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP == ip {
			return true
		}
	}
	for _, a := range s.Spec.ExternalIPs {
		if a == ip {
			return true
		}
	}
	return false
}

// serviceAt explains s as reached at port (0: any) and checks the port.
func (e *Explainer) serviceAt(ctx context.Context, target string, s *corev1.Service, port int32, h hit) (*Report, error) {
	r, err := e.explainService(ctx, s.Namespace, s.Name, h)
	if err != nil {
		return nil, err
	}
	r.Target = target + " (" + r.Target + ")"
	if port == 0 {
		return r, nil
	}
	for _, p := range s.Spec.Ports {
		if p.Port == port {
			return r, nil
		}
	}
	r.Steps = append([]Step{{Name: "port", Status: StatusBroken,
		Message: fmt.Sprintf("Service %s/%s has no port %d (its ports: %s)", s.Namespace, s.Name, port, portsString(s.Spec.Ports))}}, r.Steps...)
	r.Status = Worst(r.Steps)
	return r, nil
}

// explainPod diagnoses a pod: its phase and readiness, the Services that
// select it, and whether its declared ports listen.
func (e *Explainer) explainPod(ctx context.Context, namespace, name string) (*Report, error) {
	target := "pod/" + namespace + "/" + name
	c := e.cfg.Client.CoreV1()
	pod, err := c.Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return newReport(target, []Step{{Name: "pod", Status: StatusBroken, Message: clean(err.Error())}}), nil
	case err != nil:
		return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	st := Step{Name: "pod", Status: StatusOK, Message: fmt.Sprintf("%s, IP %s, on node %s", pod.Status.Phase, pod.Status.PodIP, pod.Spec.NodeName)}
	if !podIsReady(pod) {
		st.Status = StatusBroken
		var evs []*corev1.Event
		if list, err := c.Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": name, "reason": "Unhealthy"}.AsSelector().String()}); err == nil {
			evs = ptrs(list.Items)
		}
		why := readinessFailures([]*corev1.Pod{pod}, evs)
		st.Message += "; not ready"
		if len(why) > 0 {
			st.Message += ": " + why[0]
		}
	}
	steps := []Step{st}
	if svcs, err := c.Services(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range svcs.Items {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				steps = append(steps, Step{Name: "service", Status: StatusOK, Message: "selected by Service " + s.Name + " (" + portsString(s.Spec.Ports) + ")"})
			}
		}
	}
	steps = append(steps, e.podDials(ctx, pod)...)
	return newReport(target, steps), nil
}

// podDials asks the pod's node whether the pod's declared TCP ports listen.
func (e *Explainer) podDials(ctx context.Context, pod *corev1.Pod) []Step {
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || pod.Spec.NodeName == "" {
		return nil
	}
	var out []Step
	for _, ctr := range pod.Spec.Containers {
		for _, p := range ctr.Ports {
			addr := netip.AddrPortFrom(ip, uint16(p.ContainerPort)).String()
			dctx, cancel := context.WithTimeout(ctx, e.cfg.NodeTimeout)
			res, err := e.cfg.Nodes.Dial(dctx, pod.Spec.NodeName, addr, string(p.Protocol))
			cancel()
			out = append(out, dialStep(pod.Spec.NodeName, addr, res, err))
		}
	}
	return out
}

// explainIngress diagnoses an Ingress and the Services behind it.
func (e *Explainer) explainIngress(ctx context.Context, namespace, name string) (*Report, error) {
	target := "ingress/" + namespace + "/" + name
	ing, err := e.getIngress(ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return newReport(target, []Step{{Name: "ingress", Status: StatusBroken, Message: clean(err.Error())}}), nil
	case err != nil:
		return nil, fmt.Errorf("get ingress %s/%s: %w", namespace, name, err)
	}
	svcs, err := e.cfg.Client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list services in %s: %w", namespace, err)
	}
	in := Objects{Services: ptrs(svcs.Items)}
	seen := map[string]bool{}
	for _, b := range ingressBackends(ing) {
		if seen[b.backend.Name] {
			continue
		}
		seen[b.backend.Name] = true
		if s := findService(in.Services, namespace, b.backend.Name); s != nil {
			more, _, err := e.gather(ctx, s)
			if err != nil {
				return nil, err
			}
			in.Pods = append(in.Pods, more.Pods...)
			in.Slices = append(in.Slices, more.Slices...)
			in.Nodes, in.Events = more.Nodes, append(in.Events, more.Events...)
		}
	}
	if in.Nodes == nil {
		// No backend Service to gather for: the nodes are still where
		// the controller is asked from.
		if nodes, err := e.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
			in.Nodes = ptrs(nodes.Items)
		}
	}
	refs := ingressBackends(ing)
	in.IngressAnswers = map[string][]Answer{namespace + "/" + name: e.ingressAnswers(ctx, ing, refs[:min(len(refs), maxIngressProbes)], in.Nodes)}
	return newReport(target, CheckIngress(ing, in)), nil
}
