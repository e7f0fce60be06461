package servicelb

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodeOpt changes a test Node.
type nodeOpt func(*corev1.Node)

// testNode is a Ready, schedulable node with the given InternalIPs.
func testNode(name string, internalIPs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, ip := range internalIPs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

func (o nodeOpt) on(n *corev1.Node) *corev1.Node { o(n); return n }

var (
	notReady = nodeOpt(func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })
	cordoned = nodeOpt(func(n *corev1.Node) { n.Spec.Unschedulable = true })
	excluded = nodeOpt(func(n *corev1.Node) { n.Labels = map[string]string{LabelExcludeFromLB: ""} })
)

func withExternal(ip string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip})
	}
}

// ports gives a test Service its ports, "80/TCP" or "53/UDP".
func ports(ps ...string) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.Ports = nil
		for _, p := range ps {
			num, proto, _ := strings.Cut(p, "/")
			n, _ := strconv.Atoi(num)
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: int32(n), Protocol: corev1.Protocol(proto)})
		}
	}
}

func objects(svcs []*corev1.Service, nodes ...*corev1.Node) []runtime.Object {
	var out []runtime.Object
	for _, s := range svcs {
		out = append(out, s)
	}
	for _, n := range nodes {
		out = append(out, n)
	}
	return out
}

func (h *harness) updateNode(n *corev1.Node) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

func TestNodeAddresses(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*corev1.Node
		want  []string
	}{
		{"ready nodes' InternalIPs, sorted", []*corev1.Node{testNode("b", "10.0.0.2", "fd00::2"), testNode("a", "10.0.0.1")},
			[]string{"10.0.0.1", "10.0.0.2", "fd00::2"}},
		{"NotReady, cordoned and excluded nodes left out", []*corev1.Node{testNode("a", "10.0.0.1"),
			notReady.on(testNode("b", "10.0.0.2")), cordoned.on(testNode("c", "10.0.0.3")), excluded.on(testNode("d", "10.0.0.4"))},
			[]string{"10.0.0.1"}},
		{"ExternalIPs win when any node has one", []*corev1.Node{testNode("a", "10.0.0.1"),
			withExternal("203.0.113.2").on(testNode("b", "10.0.0.2"))}, []string{"203.0.113.2"}},
		{"no condition is not ready", []*corev1.Node{{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}}}}, nil},
		{"no nodes", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeAddresses(tc.nodes); !slices.Equal(got, addrs(tc.want...)) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPortsClaim(t *testing.T) {
	tcp80 := NodePort{v4, corev1.ProtocolTCP, 80}
	udp80 := NodePort{v4, corev1.ProtocolUDP, 80}
	tcp80v6 := NodePort{v6, corev1.ProtocolTCP, 80}
	tcp443 := NodePort{v4, corev1.ProtocolTCP, 443}
	p := NewPorts()
	steps := []struct {
		owner     string
		ports     []NodePort
		wantErr   string
		wantFreed bool
	}{
		{owner: "ns/a", ports: []NodePort{tcp80}},
		{owner: "ns/b", ports: []NodePort{udp80, tcp80v6}}, // another protocol, another family
		{owner: "ns/c", ports: []NodePort{tcp443, tcp80}, wantErr: "port 80/TCP in use on the nodes by Service ns/a"},
		{owner: "ns/a", ports: []NodePort{tcp80}}, // holding again is fine
		{owner: "ns/b", ports: []NodePort{tcp80v6, tcp80}, wantErr: "port 80/TCP in use on the nodes by Service ns/a", wantFreed: true},
		{owner: "ns/c", ports: []NodePort{tcp443, udp80}}, // b let go of udp80 when refused
		{owner: "ns/a", ports: []NodePort{tcp443}, wantErr: "port 443/TCP in use on the nodes by Service ns/c", wantFreed: true},
		{owner: "ns/b", ports: []NodePort{tcp80}}, // a holds nothing now
	}
	for i, s := range steps {
		freed, err := p.Claim(s.owner, s.ports)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
			if !errors.Is(err, ErrPortInUse) {
				t.Errorf("step %d: got %v, want ErrPortInUse", i, err)
			}
		}
		if gotErr != s.wantErr || freed != s.wantFreed {
			t.Errorf("step %d (%s): got freed %v, error %q; want %v, %q", i, s.owner, freed, gotErr, s.wantFreed, s.wantErr)
		}
	}
	if o, _ := p.Holder(tcp80v6); o != "" {
		t.Errorf("80/TCP (IPv6) held by %q after its owner was refused, want nobody", o)
	}
	if !p.Release("ns/b") || p.Release("ns/b") {
		t.Error("Release: want true once, then false")
	}
}

func TestNodeModeAssignsNodeAddresses(t *testing.T) {
	svcs := []*corev1.Service{
		lbService("a", 0, ports("80/TCP")),
		lbService("dual", 1, families(v6, v4), ports("81/TCP")),
		lbService("other-class", 2, class("example.com/lb"), ports("82/TCP")),
	}
	nodes := []*corev1.Node{testNode("n1", "10.0.0.1", "fd00::1"), testNode("n2", "10.0.0.2"),
		notReady.on(testNode("n3", "10.0.0.3")), cordoned.on(testNode("n4", "10.0.0.4"))}
	runWith(t, "", objects(svcs, nodes...), func(h *harness) {
		h.wantIngress("a", "10.0.0.1", "10.0.0.2")
		h.wantCondition("a", condTrue, ReasonAllocated)
		h.wantIngress("dual", "fd00::1", "10.0.0.1", "10.0.0.2")
		h.wantIngress("other-class")
		h.wantEvent("Normal IPAllocated")
	})
}

func TestNodeModePortConflict(t *testing.T) {
	svcs := []*corev1.Service{
		lbService("holder", 0, ports("80/TCP", "443/TCP")),
		lbService("second", 1, ports("80/TCP")),
		lbService("udp", 2, ports("80/UDP")),
		lbService("v6", 3, families(v6), ports("80/TCP")),
	}
	nodes := []*corev1.Node{testNode("n1", "10.0.0.1", "fd00::1")}
	runWith(t, "", objects(svcs, nodes...), func(h *harness) {
		h.wantIngress("holder", "10.0.0.1")
		h.wantIngress("second")
		h.wantCondition("second", condFalse, ReasonPortInUse)
		h.wantEvent("Warning AllocationFailed cannot allocate load balancer IPs: port 80/TCP in use on the nodes by Service ns/holder")
		h.wantIngress("udp", "10.0.0.1")
		h.wantIngress("v6", "fd00::1")
		// The holder moves off port 80: the waiting Service gets it.
		h.update("holder", ports("8080/TCP", "443/TCP"))
		h.wantIngress("holder", "10.0.0.1")
		h.wantIngress("second", "10.0.0.1")
		h.wantCondition("second", condTrue, ReasonAllocated)
		// A newer Service asking for a held port never takes it.
		h.update("holder", ports("80/TCP"))
		h.wantIngress("holder")
		h.wantCondition("holder", condFalse, ReasonPortInUse)
		h.wantIngress("second", "10.0.0.1")
		// Deleting the holder frees the port for the one waiting.
		h.delete("second")
		h.wantIngress("holder", "10.0.0.1")
		h.wantCondition("holder", condTrue, ReasonAllocated)
	})
}

func TestNodeModeFollowsNodes(t *testing.T) {
	svcs := []*corev1.Service{lbService("a", 0, ports("80/TCP"))}
	runWith(t, "", objects(svcs, testNode("n1", "10.0.0.1")), func(h *harness) {
		h.wantIngress("a", "10.0.0.1")
		ctx := context.Background()
		if _, err := h.client.CoreV1().Nodes().Create(ctx, testNode("n2", "10.0.0.2"), metav1.CreateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		h.settle()
		h.wantIngress("a", "10.0.0.1", "10.0.0.2")
		h.updateNode(notReady.on(testNode("n1", "10.0.0.1")))
		h.wantIngress("a", "10.0.0.2")
		h.updateNode(testNode("n2", "10.0.0.22"))
		h.wantIngress("a", "10.0.0.22")
		h.updateNode(withExternal("203.0.113.2").on(testNode("n2", "10.0.0.22")))
		h.wantIngress("a", "203.0.113.2")
		// No usable node left: pending, with a Warning.
		if err := h.client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
			h.t.Fatal(err)
		}
		h.settle()
		h.wantIngress("a")
		h.wantCondition("a", condFalse, ReasonNoNodeAddress)
		h.wantEvent("Warning AllocationFailed")
		h.updateNode(testNode("n1", "10.0.0.1"))
		h.wantIngress("a", "10.0.0.1")
		h.wantCondition("a", condTrue, ReasonAllocated)
	})
}

// After a restart the Service that held a port keeps it, even when an
// older one wants it too.
func TestNodeModeRebuildKeepsHolders(t *testing.T) {
	svcs := []*corev1.Service{
		lbService("older", 0, ports("80/TCP")),
		lbService("holder", 1, ports("80/TCP"), status("10.0.0.9")),
	}
	runWith(t, "", objects(svcs, testNode("n1", "10.0.0.1")), func(h *harness) {
		h.wantIngress("holder", "10.0.0.1")
		h.wantIngress("older")
		h.wantCondition("older", condFalse, ReasonPortInUse)
	})
}
