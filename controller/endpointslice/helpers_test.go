package endpointslice

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const testNS = "ns"

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

type svcOpt func(*corev1.Service)

// mkSvc returns Service "web" in testNS selecting app=web, port http 80 ->
// 8080/TCP, single-stack IPv4.
func mkSvc(opts ...svcOpt) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: testNS, UID: "svc-uid",
			CreationTimestamp: metav1.NewTime(t0),
		},
		Spec: corev1.ServiceSpec{
			Selector:   map[string]string{"app": "web"},
			ClusterIP:  "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{
				Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func namedTarget(name string) svcOpt {
	return func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString(name) }
}

func publishNotReady(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }

func dualStack(s *corev1.Service) {
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
}

func trafficDist(td string) svcOpt {
	return func(s *corev1.Service) { s.Spec.TrafficDistribution = &td }
}

func annotated(k, v string) svcOpt {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func labelled(k, v string) svcOpt {
	return func(s *corev1.Service) {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[k] = v
	}
}

type podOpt func(*corev1.Pod)

// mkPod returns a Running, Ready pod labelled app=web on node-a with ips.
func mkPod(name string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, UID: types.UID("uid-" + name),
			Labels:            map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(t0),
		},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{
				Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(time.Minute)),
			}},
		},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return p
}

func with(p *corev1.Pod, opts ...podOpt) *corev1.Pod {
	p = p.DeepCopy()
	for _, o := range opts {
		o(p)
	}
	return p
}

func notReady(p *corev1.Pod) {
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(2 * time.Minute))
}

func terminating(p *corev1.Pod) {
	ts := metav1.NewTime(t0.Add(3 * time.Minute))
	p.DeletionTimestamp = &ts
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func hostname(host, sub string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = host, sub }
}

func containerPort(name string, port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
			corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP})
	}
}

// manyPods returns n ready pods p000... with IPs 10.1.x.y.
func manyPods(n int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, mkPod(fmt.Sprintf("p%03d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)))
	}
	return out
}

// mkNode returns a Ready node with zone (none if "") and cpu cores.
func mkNode(name, zone string, cpu int64) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	return n
}

// twoZones is node-a in zone-a and node-b in zone-b, 4 CPUs each.
func twoZones() *topology {
	return newTopology([]*corev1.Node{mkNode("node-a", "zone-a", 4), mkNode("node-b", "zone-b", 4)})
}

// store plays the API server for reconcile tests: it applies a plan the
// way the server would, naming created slices from generateName.
type store struct {
	slices map[string]*discovery.EndpointSlice
	next   int
}

func (s *store) apply(p plan) {
	if s.slices == nil {
		s.slices = map[string]*discovery.EndpointSlice{}
	}
	for _, d := range p.delete {
		delete(s.slices, d.Name)
	}
	for _, u := range p.update {
		s.slices[u.Name] = u.DeepCopy()
	}
	for _, c := range p.create {
		c = c.DeepCopy()
		s.next++
		c.Name = fmt.Sprintf("%s%d", c.GenerateName, s.next)
		c.UID = types.UID("slice-uid-" + c.Name)
		s.slices[c.Name] = c
	}
}

func (s *store) list() []*discovery.EndpointSlice {
	var out []*discovery.EndpointSlice
	for _, sl := range s.slices {
		out = append(out, sl)
	}
	return sortedByName(out)
}

// summarize renders a slice as "IPv4 [http/TCP/8080/] ep | ep", each
// endpoint as "addrs rst node=.. zone=.. host=.. hint=zones/nodes", where
// r, s and t stand for ready, serving and terminating ('-' when false).
func summarize(s *discovery.EndpointSlice) string {
	parts := []string{fmt.Sprintf("%s [%s]", s.AddressType, portsKey(s.Ports))}
	for i := range s.Endpoints {
		parts = append(parts, summarizeEndpoint(&s.Endpoints[i]))
	}
	return strings.Join(parts, " | ")
}

func summarizeEndpoint(ep *discovery.Endpoint) string {
	flag := func(b *bool, c string) string {
		if deref(b) {
			return c
		}
		return "-"
	}
	out := strings.Join(ep.Addresses, ",") + " " +
		flag(ep.Conditions.Ready, "r") + flag(ep.Conditions.Serving, "s") + flag(ep.Conditions.Terminating, "t")
	if ep.NodeName != nil {
		out += " node=" + *ep.NodeName
	}
	if ep.Zone != nil {
		out += " zone=" + *ep.Zone
	}
	if ep.Hostname != nil {
		out += " host=" + *ep.Hostname
	}
	if h := ep.Hints; h != nil {
		var zs, ns []string
		for _, z := range h.ForZones {
			zs = append(zs, z.Name)
		}
		for _, n := range h.ForNodes {
			ns = append(ns, n.Name)
		}
		out += " hint=" + strings.Join(zs, ",") + "/" + strings.Join(ns, ",")
	}
	return out
}

func summarizeAll(list []*discovery.EndpointSlice) []string {
	var out []string
	for _, s := range list {
		out = append(out, summarize(s))
	}
	slices.Sort(out)
	return out
}

func writes(p plan) string {
	return fmt.Sprintf("create=%d update=%d delete=%d", len(p.create), len(p.update), len(p.delete))
}
