package changetracker

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"portal.dev/portal/proxy/snapshot"
)

func service(name, clusterIP string, mutate ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func slice(name, svc string, addrType discovery.AddressType, port int32, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: addrType,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(port)}},
		Endpoints:   eps,
	}
}

func endpoint(ip, node string, ready bool) discovery.Endpoint {
	return discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node), Conditions: discovery.EndpointConditions{Ready: ptr.To(ready)}}
}

var nnA = types.NamespacedName{Namespace: "ns", Name: "a"}

// addService, deleteService and the slice helpers feed the trackers the
// way the informer handlers do.
func addService(tr *ServiceTracker, s *v1.Service) {
	tr.Update(types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, nil, ServiceFromAPI(s))
}

func deleteService(tr *ServiceTracker, s *v1.Service) {
	tr.Update(types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, ServiceFromAPI(s), nil)
}

func conv(s *discovery.EndpointSlice) *Slice {
	if s == nil {
		return nil
	}
	return SliceFromAPI(s)
}

func TestServiceFromAPI(t *testing.T) {
	tests := []struct {
		name string
		svc  *v1.Service
		want *snapshot.Service
	}{
		{"ExternalName gets nothing", service("a", "", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName; s.Spec.ClusterIPs = nil }), nil},
		{"headless gets nothing", service("a", "None"), nil},
		{"no cluster IP yet gets nothing", service("a", "", func(s *v1.Service) { s.Spec.ClusterIPs = nil }), nil},
		{"ClusterIP", service("a", "10.96.0.1"), &snapshot.Service{
			Name: nnA, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
			Ports: []snapshot.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		}},
		{"LoadBalancer: VIP and unset ipMode kept, Proxy mode left alone, source ranges trimmed, health check port", service("a", "10.96.0.1", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Spec.ClusterIPs = []string{"10.96.0.1", "fd00::1"}
			s.Spec.Ports[0].NodePort = 30080
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 32000
			s.Spec.LoadBalancerSourceRanges = []string{" 203.0.113.0/24 "}
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
				{IP: "192.0.2.1"},
				{IP: "192.0.2.2", IPMode: ptr.To(v1.LoadBalancerIPModeVIP)},
				{IP: "192.0.2.3", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)},
				{Hostname: "lb.example"},
			}
		}), &snapshot.Service{
			Name:                nnA,
			ClusterIPs:          []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00::1")},
			LoadBalancerVIPs:    []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")},
			SourceRanges:        []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
			ExternalPolicyLocal: true,
			HealthCheckNodePort: 32000,
			Ports:               []snapshot.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		}},
		{"externalTrafficPolicy Local means nothing without external access", service("a", "10.96.0.1", func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}), &snapshot.Service{
			Name: nnA, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}, InternalPolicyLocal: true,
			Ports: []snapshot.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		}},
		{"ClientIP affinity defaults to 3 hours", service("a", "10.96.0.1", func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.ExternalIPs = []string{"192.0.2.9"}
		}), &snapshot.Service{
			Name: nnA, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}, ExternalIPs: []netip.Addr{netip.MustParseAddr("192.0.2.9")},
			AffinityTimeout: 3 * time.Hour,
			Ports:           []snapshot.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ServiceFromAPI(tc.svc); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestServiceTrackerCancelsOut(t *testing.T) {
	var tr ServiceTracker
	a1 := ServiceFromAPI(service("a", "10.96.0.1"))
	a2 := ServiceFromAPI(service("a", "10.96.0.1", func(s *v1.Service) { s.Spec.Ports[0].Port = 81 }))
	if !tr.Update(nnA, nil, a1) {
		t.Fatal("add: want a pending change")
	}
	if tr.Update(nnA, a1, nil) {
		t.Fatal("add then delete: want nothing pending")
	}
	if got := tr.Pending(); got != 0 {
		t.Fatalf("Pending: got %d, want 0", got)
	}
	// Changed and changed back within one sync: nothing to do.
	tr.Update(nnA, a1, a2)
	if tr.Update(nnA, a2, a1) {
		t.Fatal("change and revert: want nothing pending")
	}
	// A change the proxy does not care about (labels) is no change.
	labelled := service("a", "10.96.0.1")
	labelled.Labels = map[string]string{"x": "y"}
	if tr.Update(nnA, a1, ServiceFromAPI(labelled)) {
		t.Fatal("label change: want nothing pending")
	}
}

func TestNextAppliesBatch(t *testing.T) {
	var svcs ServiceTracker
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	eps := NewEndpointsTracker("node1", start)
	node := &snapshot.Node{Name: "node1"}

	addService(&svcs, service("a", "10.96.0.1"))
	addService(&svcs, service("b", "10.96.0.2"))
	s1 := slice("a-1", "a", discovery.AddressTypeIPv4, 8080, endpoint("10.0.0.2", "node2", true), endpoint("10.0.0.1", "node1", true))
	s1.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: start.Add(time.Second).Format(time.RFC3339Nano)}
	eps.Update(conv(nil), conv(s1))
	snap1, res := Next(nil, &svcs, eps, node)
	if want := map[types.NamespacedName]struct{}{nnA: {}, {Namespace: "ns", Name: "b"}: {}}; !reflect.DeepEqual(res.Changed, want) {
		t.Errorf("Changed: got %v, want %v", res.Changed, want)
	}
	if res.ServiceChanges != 2 || res.EndpointChanges != 1 || !res.NodeChanged {
		t.Errorf("got %+v", res)
	}
	if got := res.TriggerTimes[nnA]; len(got) != 1 || !got[0].Equal(start.Add(time.Second)) {
		t.Errorf("TriggerTimes: got %v", got)
	}
	got := snap1.Endpoints[nnA].For(snapshot.PortKey{Name: "http", Protocol: v1.ProtocolTCP})
	if len(got) != 2 || got[0].String() != "10.0.0.1:8080" || !got[0].Local || got[1].Local {
		t.Fatalf("endpoints: got %v (want sorted, first local)", got)
	}

	// Nothing pending: nothing changed, and the snapshot shares values.
	snap2, res := Next(snap1, &svcs, eps, node)
	if len(res.Changed) != 0 || res.NodeChanged {
		t.Errorf("idle Next: got %+v", res)
	}
	if snap2.Services[nnA] != snap1.Services[nnA] {
		t.Error("unchanged Service was copied")
	}

	// A slice update that changes nothing the proxy uses is dropped.
	s1b := s1.DeepCopy()
	s1b.ResourceVersion = "2"
	eps.Update(conv(s1), conv(s1b))
	if _, res := Next(snap2, &svcs, eps, node); len(res.Changed) != 0 {
		t.Errorf("no-op slice update: got %+v", res)
	}

	// Trigger times from before the tracker started are not latency.
	old := slice("a-2", "a", discovery.AddressTypeIPv4, 8080, endpoint("10.0.0.3", "node2", true))
	old.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: start.Add(-time.Hour).Format(time.RFC3339Nano)}
	eps.Update(conv(nil), conv(old))
	snap3, res := Next(snap2, &svcs, eps, node)
	if len(res.TriggerTimes) != 0 {
		t.Errorf("old trigger time counted: %v", res.TriggerTimes)
	}
	if n := len(snap3.Endpoints[nnA].For(snapshot.PortKey{Name: "http", Protocol: v1.ProtocolTCP})); n != 3 {
		t.Errorf("after second slice: got %d endpoints, want 3", n)
	}

	// Deleting the Service and its slices empties both maps.
	deleteService(&svcs, service("a", "10.96.0.1"))
	eps.Update(conv(s1), conv(nil))
	eps.Update(conv(old), conv(nil))
	snap4, res := Next(snap3, &svcs, eps, node)
	if _, ok := snap4.Services[nnA]; ok {
		t.Error("deleted Service still in snapshot")
	}
	if _, ok := snap4.Endpoints[nnA]; ok {
		t.Error("deleted endpoints still in snapshot")
	}
	if _, ok := res.Changed[nnA]; !ok {
		t.Error("deletion not reported")
	}
	// The earlier snapshot is untouched.
	if _, ok := snap3.Services[nnA]; !ok {
		t.Error("Next modified the previous snapshot")
	}
}

func TestEndpointMerge(t *testing.T) {
	tr := NewEndpointsTracker("node1", time.Time{})
	// The same address in two slices (the controller moving it) counts
	// once, and the local copy wins.
	tr.Update(nil, conv(slice("a-1", "a", discovery.AddressTypeIPv4, 80, endpoint("10.0.0.1", "node2", true))))
	tr.Update(nil, conv(slice("a-2", "a", discovery.AddressTypeIPv4, 80, endpoint("10.0.0.1", "node1", true))))
	// Conditions: nil ready means ready; serving defaults to ready;
	// terminating must be said.
	tr.Update(nil, conv(slice("a-3", "a", discovery.AddressTypeIPv6, 80,
		discovery.Endpoint{Addresses: []string{"fd00::1"}},
		discovery.Endpoint{Addresses: []string{"fd00::2"}, Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
		discovery.Endpoint{Addresses: []string{"10.9.9.9"}}, // wrong family for the slice: ignored
		discovery.Endpoint{Addresses: []string{"fd00::3"}, Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "z1"}}, ForNodes: []discovery.ForNode{{Name: "n1"}}}},
	)))
	tr.Update(nil, SliceFromAPI(&discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fqdn", Labels: map[string]string{discovery.LabelServiceName: "a"}}, AddressType: discovery.AddressTypeFQDN,
		Endpoints: []discovery.Endpoint{{Addresses: []string{"example.com"}}}}))
	merged, _ := tr.checkout()
	got := merged[nnA].For(snapshot.PortKey{Name: "http", Protocol: v1.ProtocolTCP})
	if len(got) != 4 {
		t.Fatalf("got %d endpoints, want 4: %v", len(got), got)
	}
	if e := got[0]; e.String() != "10.0.0.1:80" || !e.Local {
		t.Errorf("dedup: got %+v, want the local copy", e)
	}
	if e := got[1]; !e.Ready || !e.Serving || e.Terminating {
		t.Errorf("nil conditions: got %+v", e)
	}
	if e := got[2]; e.Ready || !e.Serving || !e.Terminating {
		t.Errorf("terminating: got %+v", e)
	}
	if e := got[3]; !reflect.DeepEqual(e.ZoneHints, []string{"z1"}) || !reflect.DeepEqual(e.NodeHints, []string{"n1"}) {
		t.Errorf("hints: got %+v", e)
	}
}

func TestTransforms(t *testing.T) {
	s := service("a", "10.96.0.1", func(s *v1.Service) {
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		s.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}
		s.ResourceVersion = "7"
	})
	out, _ := TransformService(s)
	cs := out.(*Service)
	if cs.Name != "a" || cs.Namespace != "ns" || cs.ResourceVersion != "7" || cs.Annotations != nil || cs.ManagedFields != nil {
		t.Errorf("TransformService meta: got %+v", cs.ObjectMeta)
	}
	if !reflect.DeepEqual(cs.Proxied, ServiceFromAPI(service("a", "10.96.0.1"))) {
		t.Error("TransformService: Proxied differs from ServiceFromAPI")
	}
	if again, _ := TransformService(cs); again != cs {
		t.Error("TransformService is not idempotent")
	}

	sl := slice("a-1", "a", discovery.AddressTypeIPv4, 80, endpoint("10.0.0.1", "n", true))
	sl.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z", "other": "x"}
	sl.Endpoints[0].TargetRef = &v1.ObjectReference{Kind: "Pod", Name: "p"}
	out, _ = TransformEndpointSlice(sl)
	cl := out.(*Slice)
	if cl.service != "a" || len(cl.endpoints) != 1 || cl.triggerTime.IsZero() || cl.Labels != nil {
		t.Errorf("TransformEndpointSlice: got %+v", cl)
	}
	if again, _ := TransformEndpointSlice(cl); again != cl {
		t.Error("TransformEndpointSlice is not idempotent")
	}
}

func TestSliceMovesToAnotherService(t *testing.T) {
	tr := NewEndpointsTracker("node1", time.Time{})
	s1 := conv(slice("x-1", "a", discovery.AddressTypeIPv4, 80, endpoint("10.0.0.1", "n", true)))
	tr.Update(nil, s1)
	tr.checkout()
	moved := conv(slice("x-1", "b", discovery.AddressTypeIPv4, 80, endpoint("10.0.0.1", "n", true)))
	tr.Update(s1, moved)
	merged, _ := tr.checkout()
	if a, ok := merged[nnA]; !ok || a != nil {
		t.Errorf("old Service: got %v, want no endpoints", a)
	}
	if b := merged[types.NamespacedName{Namespace: "ns", Name: "b"}]; b == nil {
		t.Error("new Service has no endpoints")
	}
}
