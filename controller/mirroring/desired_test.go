package mirroring

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

func TestDesired(t *testing.T) {
	tests := []struct {
		name        string
		ep          *corev1.Endpoints
		max         int
		want        string
		wantSkipped Skipped
	}{{
		name: "addresses are ready, notReadyAddresses are not",
		ep:   endpointsObj("ext", subset([]string{"192.0.2.2"}, []string{"192.0.2.1"}, tcp("https", 443))),
		max:  1000,
		want: "IPv4 [https:443/TCP] 192.0.2.1(notready) 192.0.2.2(ready)",
	}, {
		name: "IPv6 addresses get an IPv6 slice",
		ep: endpointsObj("ext", subset([]string{"192.0.2.1", "2001:db8::1", "::ffff:192.0.2.9"}, nil,
			tcp("https", 443))),
		max:  1000,
		want: "IPv4 [https:443/TCP] 192.0.2.1(ready) 192.0.2.9(ready) | IPv6 [https:443/TCP] 2001:db8::1(ready)",
	}, {
		name: "one slice per set of ports",
		ep: endpointsObj("ext",
			subset([]string{"192.0.2.1"}, nil, tcp("a", 1)),
			subset([]string{"192.0.2.2"}, nil, tcp("b", 2), tcp("c", 3))),
		max:  1000,
		want: "IPv4 [a:1/TCP] 192.0.2.1(ready) | IPv4 [b:2/TCP,c:3/TCP] 192.0.2.2(ready)",
	}, {
		name: "subsets with the same ports are merged first",
		ep: endpointsObj("ext",
			subset([]string{"192.0.2.2"}, nil, tcp("a", 1)),
			subset([]string{"192.0.2.1"}, nil, tcp("a", 1))),
		max:  1000,
		want: "IPv4 [a:1/TCP] 192.0.2.1(ready) 192.0.2.2(ready)",
	}, {
		name:        "at most max addresses per subset, ready first",
		ep:          endpointsObj("ext", subset([]string{"192.0.2.3", "192.0.2.2"}, []string{"192.0.2.1"}, tcp("a", 1))),
		max:         2,
		want:        "IPv4 [a:1/TCP] 192.0.2.2(ready) 192.0.2.3(ready)",
		wantSkipped: Skipped{OverLimit: 1},
	}, {
		name:        "invalid IPs are skipped",
		ep:          endpointsObj("ext", subset([]string{"not-an-ip", "192.0.2.1"}, nil, tcp("a", 1))),
		max:         1000,
		want:        "IPv4 [a:1/TCP] 192.0.2.1(ready)",
		wantSkipped: Skipped{InvalidIP: 1},
	}, {
		name: "subsets without ports mirror to slices without ports",
		ep:   endpointsObj("ext", subset([]string{"192.0.2.1"}, nil)),
		max:  1000,
		want: "IPv4 [] 192.0.2.1(ready)",
	}, {
		name: "no subsets, no slices",
		ep:   endpointsObj("ext"),
		max:  1000,
		want: "",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped := Desired(tc.ep, tc.max)
			if s := render(got); s != tc.want {
				t.Errorf("got  %s\nwant %s", s, tc.want)
			}
			if skipped != tc.wantSkipped {
				t.Errorf("got skipped %+v, want %+v", skipped, tc.wantSkipped)
			}
		})
	}
}

func TestDesiredMetadata(t *testing.T) {
	node := "node-1"
	ep := endpointsObj("ext", corev1.EndpointSubset{
		Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1", Hostname: "db-0", NodeName: &node,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "db-0", UID: "uid-db-0"}}},
		Ports: []corev1.EndpointPort{{Name: "sql", Port: 5432, Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("postgres")}},
	})
	ep.Annotations = map[string]string{
		"note":                                "copied",
		corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z",
		corev1.LastAppliedConfigAnnotation:    "{}",
	}
	got, _ := Desired(ep, 1000)
	if len(got) != 1 {
		t.Fatalf("got %d slices, want 1", len(got))
	}
	s := got[0]

	if s.Namespace != "ns" || s.Name != "" || s.GenerateName != "ext-" {
		t.Errorf("got namespace %q name %q generateName %q, want ns, none, ext-", s.Namespace, s.Name, s.GenerateName)
	}
	wantLabels := map[string]string{"team": "a", discoveryv1.LabelServiceName: "ext", discoveryv1.LabelManagedBy: ControllerName}
	if !maps.Equal(s.Labels, wantLabels) {
		t.Errorf("got labels %v, want %v", s.Labels, wantLabels)
	}
	if want := map[string]string{"note": "copied"}; !maps.Equal(s.Annotations, want) {
		t.Errorf("got annotations %v, want %v", s.Annotations, want)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Endpoints", Name: "ext", UID: "uid-ep-ext",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	if !equality.Semantic.DeepEqual(s.OwnerReferences, wantOwner) {
		t.Errorf("got ownerReferences %+v, want %+v", s.OwnerReferences, wantOwner)
	}
	if p := s.Ports[0]; ptr.Deref(p.AppProtocol, "") != "postgres" || ptr.Deref(p.Port, 0) != 5432 {
		t.Errorf("got port %d appProtocol %q, want 5432 postgres", ptr.Deref(p.Port, 0), ptr.Deref(p.AppProtocol, ""))
	}
	e := s.Endpoints[0]
	if ptr.Deref(e.Hostname, "") != "db-0" || ptr.Deref(e.NodeName, "") != "node-1" || e.TargetRef == nil || e.TargetRef.UID != "uid-db-0" {
		t.Errorf("got hostname %v node %v targetRef %+v, want db-0, node-1, pod db-0",
			ptr.Deref(e.Hostname, ""), ptr.Deref(e.NodeName, ""), e.TargetRef)
	}
}

func TestShouldMirror(t *testing.T) {
	with := func(labels, annotations map[string]string) *corev1.Endpoints {
		ep := endpointsObj("ext")
		ep.Labels, ep.Annotations = labels, annotations
		return ep
	}
	tests := []struct {
		name string
		ep   *corev1.Endpoints
		want bool
	}{
		{"plain", with(nil, nil), true},
		{"skip-mirror true", with(map[string]string{discoveryv1.LabelSkipMirror: "true"}, nil), false},
		{"skip-mirror false", with(map[string]string{discoveryv1.LabelSkipMirror: "false"}, nil), true},
		{"leader-election lock", with(nil, map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: "{}"}), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShouldMirror(tc.ep); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
