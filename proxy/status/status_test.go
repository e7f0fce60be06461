package status

import (
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

func TestBook(t *testing.T) {
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	http := snapshot.Port{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}
	snap := &snapshot.Snapshot{
		Services: map[types.NamespacedName]*snapshot.Service{web: {Name: web, ExternalPolicyLocal: true, Ports: []snapshot.Port{http}}},
		Endpoints: map[types.NamespacedName]*snapshot.ServiceEndpoints{web: {ByPort: map[snapshot.PortKey][]*snapshot.Endpoint{
			http.Key(): {
				{Addr: netip.MustParseAddr("10.244.2.7"), Port: 8080, Ready: true, Serving: true, NodeName: "node2"},
				{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080, Ready: true, Serving: true, NodeName: "node1", Local: true},
			},
		}}},
	}
	trigger := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	now := trigger.Add(150 * time.Millisecond)

	var b Book
	tests := []struct {
		name   string
		before func()
		nn     types.NamespacedName
		check  func(t *testing.T, s Service)
	}{
		{"before any sync nothing is programmed", func() {}, web, func(t *testing.T, s Service) {
			if s.Programmed || len(s.Endpoints) != 0 || !s.ProgrammedAt.IsZero() {
				t.Errorf("got %+v, want nothing programmed", s)
			}
		}},
		{"after a sync: endpoints sorted, time, trigger, local count", func() {
			b.Synced(snap, map[types.NamespacedName]struct{}{web: {}}, map[types.NamespacedName][]time.Time{web: {trigger.Add(-time.Second), trigger}}, now)
		}, web, func(t *testing.T, s Service) {
			if !s.Programmed || !s.ProgrammedAt.Equal(now) || !s.TriggerTime.Equal(trigger) || s.LocalReady != 1 || !s.ExternalPolicyLocal {
				t.Errorf("got %+v", s)
			}
			if len(s.Endpoints) != 2 || s.Endpoints[0].Address != "10.244.1.5:8080" || s.Endpoints[0].Port != "http/TCP" {
				t.Errorf("endpoints: got %+v, want 10.244.1.5:8080 first, port http/TCP", s.Endpoints)
			}
		}},
		{"a later sync that does not change the Service keeps its time", func() {
			b.Synced(snap, nil, nil, now.Add(time.Minute))
		}, web, func(t *testing.T, s Service) {
			if !s.ProgrammedAt.Equal(now) || !s.LastSync.Equal(now.Add(time.Minute)) {
				t.Errorf("got programmedAt %v lastSync %v, want %v and a minute later", s.ProgrammedAt, s.LastSync, now)
			}
		}},
		// Regression: the Book kept every Service ever synced.
		{"a Service gone from the snapshot is forgotten at the next sync", func() {
			gone := &snapshot.Snapshot{Services: map[types.NamespacedName]*snapshot.Service{}, Endpoints: map[types.NamespacedName]*snapshot.ServiceEndpoints{}}
			b.Synced(gone, map[types.NamespacedName]struct{}{web: {}}, nil, now.Add(2*time.Minute))
			if _, ok := b.changed[web]; !ok {
				t.Errorf("the sync that deleted web forgot it at once; want it kept until the next")
			}
			b.Synced(gone, nil, nil, now.Add(3*time.Minute))
		}, web, func(t *testing.T, s Service) {
			if s.Programmed || !s.ProgrammedAt.IsZero() || len(b.changed) != 0 {
				t.Errorf("got %+v and %d Services in the book, want web forgotten", s, len(b.changed))
			}
		}},
		{"an unknown Service is not programmed", func() {}, types.NamespacedName{Namespace: "x", Name: "y"}, func(t *testing.T, s Service) {
			if s.Programmed {
				t.Errorf("got %+v, want not programmed", s)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.before()
			tc.check(t, b.Service(tc.nn, "node1", "nftables", map[string]string{"web-1": "7"}, false))
		})
	}
}
