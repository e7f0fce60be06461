package endpointslice

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type reconcileCase struct {
	name string
	// beforeSvc and before, when before is non-nil, are reconciled first
	// and their result stored; beforeSvc defaults to svc.
	beforeSvc *corev1.Service
	before    []*corev1.Pod
	svc       *corev1.Service
	pods      []*corev1.Pod
	nodes     *topology // nil means twoZones()
	max       int
	// wantWrites is the plan of the second reconcile, as writes() renders it.
	wantWrites string
	// wantSlices are the stored slices afterwards, summarized and sorted;
	// nil skips the check.
	wantSlices []string
	// wantSizes are the endpoint counts of the stored slices, sorted; nil
	// skips the check.
	wantSizes []int
	check     func(t *testing.T, p plan, stored []*discovery.EndpointSlice)
}

var triggerTime = t0.Add(time.Hour)

func runCase(t *testing.T, tc reconcileCase) {
	t.Helper()
	nodes := tc.nodes
	if nodes == nil {
		nodes = twoZones()
	}
	in := func(svc *corev1.Service, pods []*corev1.Pod, st *store) reconcileInput {
		return reconcileInput{service: svc, pods: pods, nodes: nodes, slices: st.list(), maxEndpoints: tc.max, triggerTime: triggerTime}
	}
	st := &store{}
	if tc.before != nil {
		before := tc.beforeSvc
		if before == nil {
			before = tc.svc
		}
		st.apply(reconcile(in(before, tc.before, st)))
	}
	p := reconcile(in(tc.svc, tc.pods, st))
	if got := writes(p); got != tc.wantWrites {
		t.Errorf("writes: got %s, want %s", got, tc.wantWrites)
	}
	st.apply(p)
	stored := st.list()
	if tc.wantSlices != nil {
		if got := summarizeAll(stored); !slices.Equal(got, tc.wantSlices) {
			t.Errorf("slices:\ngot  %q\nwant %q", got, tc.wantSlices)
		}
	}
	if tc.wantSizes != nil {
		var sizes []int
		for _, s := range stored {
			sizes = append(sizes, len(s.Endpoints))
		}
		slices.Sort(sizes)
		if !slices.Equal(sizes, tc.wantSizes) {
			t.Errorf("slice sizes: got %v, want %v", sizes, tc.wantSizes)
		}
	}
	if tc.check != nil {
		tc.check(t, p, stored)
	}
	// Nothing changed since: a second pass must not write.
	if again := reconcile(in(tc.svc, tc.pods, st)); writes(again) != "create=0 update=0 delete=0" {
		t.Errorf("second pass: got %s, want no writes", writes(again))
	}
}

func TestReconcileEndpoints(t *testing.T) {
	a, b, c := mkPod("a", "10.0.0.1"), mkPod("b", "10.0.0.2"), mkPod("c", "10.0.0.3")
	withZonelessNode := newTopology([]*corev1.Node{mkNode("node-a", "zone-a", 4), mkNode("node-b", "zone-b", 4), mkNode("node-c", "", 4)})
	cases := []reconcileCase{
		{
			name: "named targetPort resolving to two port sets makes two slices",
			svc:  mkSvc(namedTarget("http")),
			pods: []*corev1.Pod{
				with(a, containerPort("http", 8080)),
				with(b, containerPort("http", 9090)),
				with(c, containerPort("http", 8080)),
			},
			wantWrites: "create=2 update=0 delete=0",
			wantSlices: []string{
				"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.3 rs- node=node-a zone=zone-a",
				"IPv4 [http/TCP/9090/] | 10.0.0.2 rs- node=node-a zone=zone-a",
			},
		},
		{
			name:       "named targetPort a pod lacks leaves that pod without ports",
			svc:        mkSvc(namedTarget("http")),
			pods:       []*corev1.Pod{with(a, containerPort("http", 8080)), b},
			wantWrites: "create=2 update=0 delete=0",
			wantSlices: []string{
				"IPv4 [] | 10.0.0.2 rs- node=node-a zone=zone-a",
				"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a",
			},
		},
		{
			name: "ready, not-ready and terminating pods; terminal and IP-less pods left out",
			svc:  mkSvc(),
			pods: []*corev1.Pod{
				a,
				with(b, notReady),
				with(c, terminating),
				with(mkPod("d", "10.0.0.4"), terminating, notReady),
				with(mkPod("e", "10.0.0.5"), phase(corev1.PodSucceeded)),
				with(mkPod("f", "10.0.0.6"), phase(corev1.PodFailed)),
				mkPod("g"),
			},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/]" +
				" | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.2 --- node=node-a zone=zone-a" +
				" | 10.0.0.3 -st node=node-a zone=zone-a | 10.0.0.4 --t node=node-a zone=zone-a"},
		},
		{
			name:       "publishNotReadyAddresses makes every endpoint ready",
			svc:        mkSvc(publishNotReady),
			pods:       []*corev1.Pod{a, with(b, notReady), with(c, terminating)},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/]" +
				" | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.2 r-- node=node-a zone=zone-a | 10.0.0.3 rst node=node-a zone=zone-a"},
		},
		{
			name:  "zone from the node, hostname only when the subdomain is the service",
			svc:   mkSvc(),
			nodes: withZonelessNode,
			pods: []*corev1.Pod{
				with(a, hostname("h1", "web")),
				with(b, onNode("node-b"), hostname("h2", "other")),
				with(c, onNode("node-c")),
			},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/]" +
				" | 10.0.0.1 rs- node=node-a zone=zone-a host=h1 | 10.0.0.2 rs- node=node-b zone=zone-b | 10.0.0.3 rs- node=node-c"},
		},
		{
			name:       "dual-stack service makes an IPv4 and an IPv6 slice",
			svc:        mkSvc(dualStack),
			pods:       []*corev1.Pod{mkPod("a", "10.0.0.1", "fd00::1"), b},
			wantWrites: "create=2 update=0 delete=0",
			wantSlices: []string{
				"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.2 rs- node=node-a zone=zone-a",
				"IPv6 [http/TCP/8080/] | fd00::1 rs- node=node-a zone=zone-a",
			},
		},
		{
			name:       "family the service dropped has its slice deleted",
			beforeSvc:  mkSvc(dualStack),
			before:     []*corev1.Pod{mkPod("a", "10.0.0.1", "fd00::1")},
			svc:        mkSvc(),
			pods:       []*corev1.Pod{mkPod("a", "10.0.0.1", "fd00::1")},
			wantWrites: "create=0 update=0 delete=1",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a"},
		},
		{
			name:       "headless service without ports",
			svc:        mkSvc(func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.Ports = corev1.ClusterIPNone, nil }),
			pods:       []*corev1.Pod{a},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [] | 10.0.0.1 rs- node=node-a zone=zone-a"},
			check: func(t *testing.T, _ plan, stored []*discovery.EndpointSlice) {
				if _, ok := stored[0].Labels[corev1.IsHeadlessService]; !ok {
					t.Errorf("labels: got %v, want the headless label", stored[0].Labels)
				}
			},
		},
		{
			name:       "no pods: one placeholder slice",
			svc:        mkSvc(),
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 []"},
		},
		{
			name: "pod on an unknown node is left out and reported",
			svc:  mkSvc(),
			pods: []*corev1.Pod{a, with(b, onNode("node-x"))},
			check: func(t *testing.T, p plan, _ []*discovery.EndpointSlice) {
				if !slices.Equal(p.missingNodes, []string{"b"}) {
					t.Errorf("missingNodes: got %v, want [b]", p.missingNodes)
				}
			},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a"},
		},
		{
			name:       "pod on an unknown node is kept with publishNotReadyAddresses",
			svc:        mkSvc(publishNotReady),
			pods:       []*corev1.Pod{with(a, onNode("node-x"))},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-x"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc) })
	}
}

func TestReconcileFewWrites(t *testing.T) {
	pods150 := manyPods(150)
	replace := func(i int, p *corev1.Pod) []*corev1.Pod {
		out := slices.Clone(pods150)
		out[i] = p
		return out
	}
	a, b, c := mkPod("a", "10.0.0.1"), mkPod("b", "10.0.0.2"), mkPod("c", "10.0.0.3")
	cases := []reconcileCase{
		{
			name:       "150 pods make two slices of 100 and 50",
			svc:        mkSvc(),
			pods:       pods150,
			wantWrites: "create=2 update=0 delete=0",
			wantSizes:  []int{50, 100},
		},
		{
			name:       "max endpoints per slice is honoured",
			svc:        mkSvc(),
			pods:       pods150,
			max:        40,
			wantWrites: "create=4 update=0 delete=0",
			wantSizes:  []int{30, 40, 40, 40},
		},
		{
			name:       "readiness flip of one pod rewrites exactly one slice",
			svc:        mkSvc(),
			before:     pods150,
			pods:       replace(120, with(pods150[120], notReady)),
			wantWrites: "create=0 update=1 delete=0",
			wantSizes:  []int{50, 100},
			check: func(t *testing.T, p plan, _ []*discovery.EndpointSlice) {
				got := p.update[0].Annotations[corev1.EndpointsLastChangeTriggerTime]
				if want := triggerTime.Format(time.RFC3339Nano); got != want {
					t.Errorf("trigger time annotation: got %q, want %q", got, want)
				}
			},
		},
		{
			name:       "pod deletion rewrites exactly one slice",
			svc:        mkSvc(),
			before:     pods150,
			pods:       slices.Delete(slices.Clone(pods150), 7, 8),
			wantWrites: "create=0 update=1 delete=0",
			check: func(t *testing.T, p plan, stored []*discovery.EndpointSlice) {
				total := 0
				for _, s := range stored {
					total += len(s.Endpoints)
				}
				if len(stored) != 2 || total != 149 {
					t.Errorf("stored: got %d slices with %d endpoints, want 2 with 149", len(stored), total)
				}
			},
		},
		{
			name:       "new pod goes into the slice with room",
			svc:        mkSvc(),
			before:     pods150,
			pods:       append(slices.Clone(pods150), mkPod("new", "10.9.9.9")),
			wantWrites: "create=0 update=1 delete=0",
			wantSizes:  []int{51, 100},
		},
		{
			name:       "deleting every pod of a slice deletes the slice",
			svc:        mkSvc(),
			max:        2,
			before:     []*corev1.Pod{a, b, c},
			pods:       []*corev1.Pod{a, b},
			wantWrites: "create=0 update=0 delete=1",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.2 rs- node=node-a zone=zone-a"},
		},
		{
			name:       "last pod deleted turns its slice into the placeholder",
			svc:        mkSvc(),
			before:     []*corev1.Pod{a},
			wantWrites: "create=0 update=1 delete=0",
			wantSlices: []string{"IPv4 []"},
		},
		{
			name:       "no write when nothing changed",
			svc:        mkSvc(),
			before:     pods150,
			pods:       pods150,
			wantWrites: "create=0 update=0 delete=0",
			wantSizes:  []int{50, 100},
		},
		{
			name:   "pod status noise that endpoints don't show writes nothing",
			svc:    mkSvc(),
			before: []*corev1.Pod{a},
			pods: []*corev1.Pod{with(a, func(p *corev1.Pod) {
				p.ResourceVersion = "99"
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 3}}
			})},
			wantWrites: "create=0 update=0 delete=0",
		},
		{
			name:       "slice of an earlier service with the same name is replaced",
			beforeSvc:  mkSvc(func(s *corev1.Service) { s.UID = "old-uid" }),
			before:     []*corev1.Pod{a},
			svc:        mkSvc(),
			pods:       []*corev1.Pod{a},
			wantWrites: "create=1 update=0 delete=1",
			check: func(t *testing.T, _ plan, stored []*discovery.EndpointSlice) {
				if len(stored) != 1 || !ownedBy(stored[0], mkSvc()) {
					t.Errorf("stored: got %d slices owned by %v, want 1 owned by the new service", len(stored), stored[0].OwnerReferences)
				}
			},
		},
		{
			name:       "service label change rewrites the slice",
			before:     []*corev1.Pod{a},
			beforeSvc:  mkSvc(),
			svc:        mkSvc(labelled("team", "blue")),
			pods:       []*corev1.Pod{a},
			wantWrites: "create=0 update=1 delete=0",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc) })
	}
}

func TestReconcileHints(t *testing.T) {
	a := mkPod("a", "10.0.0.1")
	b := with(mkPod("b", "10.0.0.2"), onNode("node-b"))
	c := with(mkPod("c", "10.0.0.3"), onNode("node-b"), notReady)
	notReadyZoneless := mkNode("node-c", "", 4)
	notReadyZoneless.Status.Conditions[0].Status = corev1.ConditionFalse
	cases := []reconcileCase{
		{
			name:       "PreferSameNode hints ready endpoints for their zone and node",
			svc:        mkSvc(trafficDist(corev1.ServiceTrafficDistributionPreferSameNode)),
			pods:       []*corev1.Pod{a, b, c},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/]" +
				" | 10.0.0.1 rs- node=node-a zone=zone-a hint=zone-a/node-a" +
				" | 10.0.0.2 rs- node=node-b zone=zone-b hint=zone-b/node-b" +
				" | 10.0.0.3 --- node=node-b zone=zone-b"},
		},
		{
			name:       "PreferClose hints ready endpoints for their zone",
			svc:        mkSvc(trafficDist(corev1.ServiceTrafficDistributionPreferClose)),
			pods:       []*corev1.Pod{a, b, c},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/]" +
				" | 10.0.0.1 rs- node=node-a zone=zone-a hint=zone-a/" +
				" | 10.0.0.2 rs- node=node-b zone=zone-b hint=zone-b/" +
				" | 10.0.0.3 --- node=node-b zone=zone-b"},
		},
		{
			name:       "switching PreferClose to PreferSameNode rewrites unchanged slices",
			beforeSvc:  mkSvc(trafficDist(corev1.ServiceTrafficDistributionPreferClose)),
			before:     []*corev1.Pod{a},
			svc:        mkSvc(trafficDist(corev1.ServiceTrafficDistributionPreferSameNode)),
			pods:       []*corev1.Pod{a},
			wantWrites: "create=0 update=1 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a hint=zone-a/node-a"},
		},
		{
			name:       "dropping trafficDistribution clears the hints",
			beforeSvc:  mkSvc(trafficDist(corev1.ServiceTrafficDistributionPreferClose)),
			before:     []*corev1.Pod{a},
			svc:        mkSvc(),
			pods:       []*corev1.Pod{a},
			wantWrites: "create=0 update=1 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a"},
		},
		{
			name:       "topology-mode Auto with balanced zones hints each endpoint for its zone",
			svc:        mkSvc(annotated(corev1.AnnotationTopologyMode, "Auto")),
			pods:       []*corev1.Pod{a, mkPod("a2", "10.0.0.5"), b, with(mkPod("b2", "10.0.0.6"), onNode("node-b"))},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/]" +
				" | 10.0.0.1 rs- node=node-a zone=zone-a hint=zone-a/" +
				" | 10.0.0.2 rs- node=node-b zone=zone-b hint=zone-b/" +
				" | 10.0.0.5 rs- node=node-a zone=zone-a hint=zone-a/" +
				" | 10.0.0.6 rs- node=node-b zone=zone-b hint=zone-b/"},
		},
		{
			name:       "topology-mode Auto gives an over-served zone's endpoint to the other zone",
			svc:        mkSvc(annotated(corev1.AnnotationTopologyMode, "Auto")),
			pods:       []*corev1.Pod{a, mkPod("a2", "10.0.0.5"), mkPod("a3", "10.0.0.6"), b},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/]" +
				" | 10.0.0.1 rs- node=node-a zone=zone-a hint=zone-b/" +
				" | 10.0.0.2 rs- node=node-b zone=zone-b hint=zone-b/" +
				" | 10.0.0.5 rs- node=node-a zone=zone-a hint=zone-a/" +
				" | 10.0.0.6 rs- node=node-a zone=zone-a hint=zone-a/"},
		},
		{
			name:       "topology-mode Auto withholds hints when an endpoint has no zone",
			svc:        mkSvc(annotated(corev1.AnnotationTopologyMode, "Auto")),
			nodes:      newTopology([]*corev1.Node{mkNode("node-a", "zone-a", 4), mkNode("node-b", "zone-b", 4), notReadyZoneless}),
			pods:       []*corev1.Pod{a, b, with(mkPod("z", "10.0.0.9"), onNode("node-c"))},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/]" +
				" | 10.0.0.1 rs- node=node-a zone=zone-a | 10.0.0.2 rs- node=node-b zone=zone-b | 10.0.0.9 rs- node=node-c"},
			check: func(t *testing.T, p plan, _ []*discovery.EndpointSlice) {
				if len(p.hintsOff) != 1 || !strings.Contains(p.hintsOff[0], "zone") {
					t.Errorf("hintsOff: got %q, want a missing-zone reason", p.hintsOff)
				}
			},
		},
		{
			name:       "topology-mode Auto withholds hints with fewer endpoints than zones",
			svc:        mkSvc(annotated(corev1.AnnotationTopologyMode, "Auto")),
			pods:       []*corev1.Pod{a},
			wantWrites: "create=1 update=0 delete=0",
			wantSlices: []string{"IPv4 [http/TCP/8080/] | 10.0.0.1 rs- node=node-a zone=zone-a"},
		},
		{
			name:       "topology-mode Auto withholds hints when zones can't be balanced",
			svc:        mkSvc(annotated(corev1.AnnotationTopologyMode, "Auto")),
			nodes:      newTopology([]*corev1.Node{mkNode("node-a", "zone-a", 1), mkNode("node-b", "zone-b", 1), mkNode("node-c", "zone-c", 1)}),
			pods:       []*corev1.Pod{a, b, with(mkPod("c2", "10.0.0.7"), onNode("node-c")), mkPod("a2", "10.0.0.8")},
			wantWrites: "create=1 update=0 delete=0",
			check: func(t *testing.T, p plan, stored []*discovery.EndpointSlice) {
				for _, ep := range stored[0].Endpoints {
					if ep.Hints != nil {
						t.Errorf("endpoint %v: got hints %v, want none", ep.Addresses, ep.Hints)
					}
				}
				if len(p.hintsOff) != 1 || !strings.Contains(p.hintsOff[0], "overload") {
					t.Errorf("hintsOff: got %q, want the overload reason", p.hintsOff)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc) })
	}
}

func TestSliceMetadata(t *testing.T) {
	svc := mkSvc(labelled("team", "blue"), labelled(discovery.LabelServiceName, "evil"), labelled(discovery.LabelManagedBy, "evil"))
	p := reconcile(reconcileInput{service: svc, pods: []*corev1.Pod{mkPod("a", "10.0.0.1")}, nodes: twoZones(), triggerTime: triggerTime})
	if len(p.create) != 1 {
		t.Fatalf("creates: got %d, want 1", len(p.create))
	}
	s := p.create[0]
	wantLabels := map[string]string{"team": "blue", discovery.LabelServiceName: "web", discovery.LabelManagedBy: ControllerName}
	if !mapsEqual(s.Labels, wantLabels) {
		t.Errorf("labels: got %v, want %v", s.Labels, wantLabels)
	}
	if s.GenerateName != "web-" {
		t.Errorf("generateName: got %q, want %q", s.GenerateName, "web-")
	}
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: "web", UID: "svc-uid", Controller: new(true), BlockOwnerDeletion: new(true)}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].String() != want.String() {
		t.Errorf("ownerReferences: got %v, want [%v]", s.OwnerReferences, want)
	}
	if got, want := s.Annotations[corev1.EndpointsLastChangeTriggerTime], "2026-03-01T11:00:00Z"; got != want {
		t.Errorf("trigger time annotation: got %q, want %q", got, want)
	}
	ep := s.Endpoints[0]
	if ep.TargetRef == nil || *ep.TargetRef != (corev1.ObjectReference{Kind: "Pod", Namespace: testNS, Name: "a", UID: "uid-a"}) {
		t.Errorf("targetRef: got %v, want Pod ns/a uid-a", ep.TargetRef)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
