package explain

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"portal.dev/portal/agent/dialcheck"
	"portal.dev/portal/agent/httpprobe"
	"portal.dev/portal/proxy/status"
)

// fakeDNS answers A queries from a table; names not in it are NXDOMAIN.
type fakeDNS map[string][]string

func (f fakeDNS) Query(_ context.Context, name string, qtype uint16) (*dns.Msg, string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	ips, ok := f[strings.TrimSuffix(name, ".")]
	if !ok {
		m.Rcode = dns.RcodeNameError
		return m, "10.96.0.10:53", nil
	}
	for _, ip := range ips {
		if qtype == dns.TypeAAAA && strings.Contains(ip, ":") {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 5}, AAAA: net.ParseIP(ip)})
		}
		if qtype == dns.TypeA && !strings.Contains(ip, ":") && net.ParseIP(ip) != nil {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		}
		if qtype == dns.TypeSRV {
			m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 5}, Target: ip, Port: 80})
		}
	}
	return m, "10.96.0.10:53", nil
}

// fakeNodes answers the node questions from tables.
type fakeNodes struct {
	dial   map[string]string // address -> result
	proxy  map[string]status.Service
	errors map[string]error // node -> error
	// ingress is what each node's Ingress controller answers, whatever
	// is asked; a node not in it runs none.
	ingress map[string]httpprobe.Result
}

func (f fakeNodes) HTTPProbe(_ context.Context, node string, req httpprobe.Request) (httpprobe.Result, error) {
	if err := f.errors[node]; err != nil {
		return httpprobe.Result{}, err
	}
	r, ok := f.ingress[node]
	if !ok {
		return r, fmt.Errorf("%w: %s%s for %s", ErrNoIngress, noIngressText, node, req.Scheme)
	}
	r.Scheme, r.Host, r.Path, r.Address = req.Scheme, req.Host, req.Path, "127.0.0.1:80"
	return r, nil
}

func (f fakeNodes) Dial(_ context.Context, node, address, protocol string) (dialcheck.Result, error) {
	if err := f.errors[node]; err != nil {
		return dialcheck.Result{}, err
	}
	r := f.dial[address]
	if r == "forbidden" { // what the agent answers for an address not its pods'
		return dialcheck.Result{}, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes/proxy"}, node, fmt.Errorf("%s is not the address of a running pod", address))
	}
	if r == "" {
		r = dialcheck.Open
	}
	return dialcheck.Result{Address: address, Protocol: "TCP", Result: r}, nil
}

func (f fakeNodes) ProxyStatus(_ context.Context, node string, nn types.NamespacedName) (status.Service, error) {
	if err := f.errors[node]; err != nil {
		return status.Service{}, err
	}
	return f.proxy[node], nil
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func webService(mut func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"},
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")}}}}
	if mut != nil {
		mut(s)
	}
	return s
}

func webPod(name, node, ip string, ready bool, mut func(*corev1.Pod)) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	if mut != nil {
		mut(p)
	}
	return p
}

func webSlice(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abc", ResourceVersion: "42",
			Labels:      map[string]string{discoveryv1.LabelServiceName: "web"},
			Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-01-01T10:00:00Z"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		Endpoints:   eps,
	}
}

func ep(ip, node string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-" + ip}}
}

func programmed(node string, addrs ...string) status.Service {
	s := status.Service{Node: node, Mode: "nftables", Programmed: true,
		ProgrammedAt: time.Date(2026, 1, 1, 10, 0, 0, 120e6, time.UTC), TriggerTime: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, status.Endpoint{Port: "http/TCP", Address: a, Ready: true, Serving: true})
	}
	return s
}

var healthyDNS = fakeDNS{"web.default.svc.cluster.local": {"10.96.0.20"}, "_http._tcp.web.default.svc.cluster.local": {"web.default.svc.cluster.local."}}

func TestExplain(t *testing.T) {
	healthy := []runtime.Object{readyNode("node1"), readyNode("node2"), webService(nil),
		webPod("web-1", "node1", "10.244.1.5", true, nil), webSlice(ep("10.244.1.5", "node1", true))}
	healthyNodes := fakeNodes{proxy: map[string]status.Service{"node1": programmed("node1", "10.244.1.5:8080"), "node2": programmed("node2", "10.244.1.5:8080")}}

	tests := []struct {
		name       string
		objects    []runtime.Object
		dns        fakeDNS
		nodes      fakeNodes
		target     string
		namespace  string
		wantStatus Status
		wantStep   string // the step that must carry wantStatus
		wantMsg    string // in that step's message
	}{
		{name: "healthy Service ok at every step", objects: healthy, dns: healthyDNS, nodes: healthyNodes, target: "svc/web",
			wantStatus: StatusOK, wantStep: "latency", wantMsg: "reached 2 of 2 node(s) asked, slowest node1 in 120ms (from the pod's change to the node's rules: the EndpointSlice update, its watch, the proxy's --min-sync-period between syncs and the write)"},
		{name: "dual-stack Service: A and AAAA both asked", target: "svc/web", nodes: healthyNodes,
			dns: fakeDNS{"web.default.svc.cluster.local": {"10.96.0.20", "fd00::20"}, "_http._tcp.web.default.svc.cluster.local": {"web.default.svc.cluster.local."}},
			objects: []runtime.Object{readyNode("node1"), readyNode("node2"), webPod("web-1", "node1", "10.244.1.5", true, nil), webSlice(ep("10.244.1.5", "node1", true)),
				webService(func(s *corev1.Service) {
					s.Spec.ClusterIPs = []string{"10.96.0.20", "fd00::20"}
					s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
				})},
			wantStatus: StatusOK, wantStep: "dns", wantMsg: "-> 10.96.0.20,fd00::20"},
		// Regression: the agent refuses to dial the node's own address, and
		// that 403 was shown as the user lacking nodes/proxy.
		{name: "a hostNetwork endpoint is not dialed", target: "svc/web", dns: healthyDNS,
			nodes: fakeNodes{dial: map[string]string{"10.0.0.1:8080": "forbidden"},
				proxy: map[string]status.Service{"node1": programmed("node1", "10.0.0.1:8080"), "node2": programmed("node2", "10.0.0.1:8080")}},
			objects: []runtime.Object{withAddress(readyNode("node1"), "10.0.0.1"), readyNode("node2"), webService(nil),
				webPod("web-10.0.0.1", "node1", "10.0.0.1", true, func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
				webSlice(ep("10.0.0.1", "node1", true))},
			wantStatus: StatusOK, wantStep: "endpoint/10.0.0.1:8080", wantMsg: "hostNetwork endpoint: not checked"},
		{name: "selector matching nothing shows the nearest label", target: "svc/web", dns: healthyDNS, nodes: healthyNodes,
			objects: []runtime.Object{readyNode("node1"), webService(nil),
				webPod("db-1", "node1", "10.244.1.6", true, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "database"} }),
				webPod("web-1", "node1", "10.244.1.5", true, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "wbe"} })},
			wantStatus: StatusBroken, wantStep: "selector", wantMsg: "nearest: label app=wbe, selector wants app=web"},
		{name: "targetPort name no container has", target: "svc/web", dns: healthyDNS, nodes: healthyNodes,
			objects: []runtime.Object{readyNode("node1"), webService(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("htpp") }),
				webPod("web-1", "node1", "10.244.1.5", true, nil)},
			wantStatus: StatusBroken, wantStep: "endpoints", wantMsg: `no container of 1 selected pod(s) has a port named "htpp" (declared: http=8080)`},
		{name: "a port nobody listens on", target: "svc/web", dns: healthyDNS,
			nodes:   fakeNodes{dial: map[string]string{"10.244.1.5:8080": dialcheck.Refused}, proxy: healthyNodes.proxy},
			objects: healthy, wantStatus: StatusBroken, wantStep: "endpoint/10.244.1.5:8080", wantMsg: "nothing listens on 10.244.1.5:8080: connection refused"},
		{name: "every pod failing readiness, with the probe's message escaped", target: "svc/web", dns: healthyDNS, nodes: healthyNodes,
			objects: []runtime.Object{readyNode("node1"), webService(nil), webPod("web-1", "node1", "10.244.1.5", false, nil),
				webSlice(ep("10.244.1.5", "node1", false)),
				&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e1"}, Reason: "Unhealthy",
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"},
					Message:        "Readiness probe failed: HTTP probe failed with statuscode: 503 \x1b[31mred\x1b[0m"}},
			wantStatus: StatusBroken, wantStep: "endpoints", wantMsg: `Readiness probe failed: HTTP probe failed with statuscode: 503 \x1b[31mred`},
		{name: "pods on a node whose proxy is stopped", target: "svc/web", dns: healthyDNS, objects: healthy,
			nodes:      fakeNodes{proxy: healthyNodes.proxy, errors: map[string]error{"node2": fmt.Errorf("%w: %s", ErrProxyDown, "the service proxy of node node2 does not answer at 127.0.0.1:10249: connection refused")}},
			wantStatus: StatusBroken, wantStep: "node/node2", wantMsg: "the service proxy of node node2 does not answer"},
		{name: "a node that still routes to a deleted pod", target: "svc/web", dns: healthyDNS, objects: healthy,
			nodes:      fakeNodes{proxy: map[string]status.Service{"node1": programmed("node1", "10.244.1.5:8080"), "node2": programmed("node2", "10.244.1.5:8080", "10.244.2.9:8080")}},
			wantStatus: StatusBroken, wantStep: "node/node2", wantMsg: "still routes to 10.244.2.9:8080"},
		{name: "a node that does not answer is said and skipped", target: "svc/web", dns: healthyDNS, objects: healthy,
			nodes:      fakeNodes{proxy: healthyNodes.proxy, errors: map[string]error{"node2": context.DeadlineExceeded}},
			wantStatus: StatusWarning, wantStep: "node/node2", wantMsg: "node node2 does not answer"},
		{name: "a LoadBalancer with no pool", target: "svc/web", dns: healthyDNS, nodes: healthyNodes,
			objects: []runtime.Object{readyNode("node1"), webPod("web-1", "node1", "10.244.1.5", true, nil), webSlice(ep("10.244.1.5", "node1", true)),
				webService(func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeLoadBalancer
					s.Status.Conditions = []metav1.Condition{{Type: lbConditionType, Status: "False", Reason: "NoPool",
						Message: "cannot allocate load balancer IPs: no pool serves IPv4"}}
				})},
			wantStatus: StatusBroken, wantStep: "loadbalancer", wantMsg: "no pool serves IPv4 (NoPool)"},
		{name: "ExternalName that does not resolve", target: "svc/web", dns: fakeDNS{}, nodes: healthyNodes,
			objects: []runtime.Object{webService(func(s *corev1.Service) {
				s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "nosuch.invalid"}
			})},
			wantStatus: StatusBroken, wantStep: "dns", wantMsg: "externalName nosuch.invalid does not resolve (NXDOMAIN"},
		{name: "Ingress pointing at a missing Service port", target: "svc/web", dns: healthyDNS, nodes: healthyNodes,
			objects: append(healthy[:len(healthy):len(healthy)], &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "site"},
				Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "web", Port: networkingv1.ServiceBackendPort{Number: 8080}}}}}),
			wantStatus: StatusBroken, wantStep: "ingress/default/site", wantMsg: "Service web has no port 8080"},
		{name: "Service name asked in the wrong namespace", target: "web.other", dns: healthyDNS, nodes: healthyNodes, objects: healthy,
			wantStatus: StatusBroken, wantStep: "dns", wantMsg: "there is in default; ask for web.default"},
		{name: "a Service that does not exist suggests close names", target: "svc/wbe", dns: healthyDNS, nodes: healthyNodes, objects: healthy,
			wantStatus: StatusBroken, wantStep: "service", wantMsg: "did you mean svc/web?"},
		{name: "ETP Local hit on a node without local endpoints", target: "10.0.0.2:30080", dns: healthyDNS,
			nodes: fakeNodes{proxy: map[string]status.Service{"node1": etpLocal(programmed("node1", "10.244.1.5:8080"), 1), "node2": etpLocal(programmed("node2", "10.244.1.5:8080"), 0)}},
			objects: []runtime.Object{readyNode("node1"), withAddress(readyNode("node2"), "10.0.0.2"), webPod("web-1", "node1", "10.244.1.5", true, nil),
				webSlice(ep("10.244.1.5", "node1", true)), webService(func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeNodePort
					s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
					s.Spec.Ports[0].NodePort = 30080
				})},
			wantStatus: StatusBroken, wantStep: "node/node2", wantMsg: "externalTrafficPolicy Local and node2 has no local ready endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{Client: fake.NewClientset(tc.objects...), DNS: tc.dns, Nodes: tc.nodes})
			r, err := e.Explain(context.Background(), tc.namespace, tc.target)
			if err != nil {
				t.Fatalf("Explain: %v", err)
			}
			var text bytes.Buffer
			WriteText(&text, r)
			if r.Status != tc.wantStatus {
				t.Errorf("got status %s, want %s\n%s", r.Status, tc.wantStatus, text.String())
			}
			step := findStep(r, tc.wantStep)
			if step == nil {
				t.Fatalf("no step %s\n%s", tc.wantStep, text.String())
			}
			if step.Status != tc.wantStatus || !strings.Contains(step.Message, tc.wantMsg) {
				t.Errorf("step %s: got %s %q, want %s containing %q\n%s", tc.wantStep, step.Status, step.Message, tc.wantStatus, tc.wantMsg, text.String())
			}
			if strings.ContainsRune(text.String(), 0x1b) {
				t.Errorf("an escape character reached the output:\n%q", text.String())
			}
		})
	}
}

func etpLocal(s status.Service, local int) status.Service {
	s.ExternalPolicyLocal, s.LocalReady = true, local
	return s
}

func withAddress(n *corev1.Node, ip string) *corev1.Node {
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	return n
}

func findStep(r *Report, name string) *Step {
	for i := range r.Steps {
		if r.Steps[i].Name == name {
			return &r.Steps[i]
		}
	}
	return nil
}

func TestClean(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"\x1b[2J\x1b[Hgotcha", `\x1b[2J\x1b[Hgotcha`},
		{"line1\nline2\ttab", `line1\nline2\ttab`},
		{"bad \xff utf8", `bad \xff utf8`},
		{"bidi \u202e override", `bidi \u202e override`},
		{"ünïcode ok", "ünïcode ok"},
	}
	for _, tc := range tests {
		if got := clean(tc.in); got != tc.want {
			t.Errorf("clean(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCloseNames(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{"wbe", []string{"web", "lb", "api"}, "web"},
		{"frontend", []string{"frontend-v2", "backend", "front"}, "front,frontend-v2"},
		{"db", []string{"web", "cache"}, ""},
	}
	for _, tc := range tests {
		if got := strings.Join(closeNames(tc.name, tc.names, 3), ","); got != tc.want {
			t.Errorf("closeNames(%s): got %q, want %q", tc.name, got, tc.want)
		}
	}
}
