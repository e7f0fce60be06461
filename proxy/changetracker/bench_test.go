package changetracker

import (
	"fmt"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"

	"portal.dev/portal/proxy/snapshot"
)

// BenchmarkNext10k: one EndpointSlice changes among 10,000 Services x 10
// endpoints; Next builds the next snapshot (the core's share of a
// partial sync, before the mode's).
func BenchmarkNext10k(b *testing.B) {
	var svcs ServiceTracker
	eps := NewEndpointsTracker("node1", time.Now())
	node := &snapshot.Node{Name: "node1"}
	var slices []*Slice
	for i := range 10000 {
		name := fmt.Sprintf("svc%d", i)
		addService(&svcs, service(name, fmt.Sprintf("10.%d.%d.%d", 96+i/65536, (i/256)%256, i%256)))
		var list []discovery.Endpoint
		for j := range 10 {
			k := i*10 + j
			list = append(list, endpoint(fmt.Sprintf("10.%d.%d.%d", 128+k/65536, (k/256)%256, k%256), "node2", true))
		}
		s := slice(name+"-1", name, discovery.AddressTypeIPv4, 8080, list...)
		slices = append(slices, conv(s))
		eps.Update(nil, conv(s))
	}
	snap, _ := Next(nil, &svcs, eps, node)
	changed := *slices[5000]
	changed.endpoints = append([]sliceEndpoint(nil), changed.endpoints...)
	changed.endpoints[0].flags &^= ready
	i := 0
	b.ResetTimer()
	for b.Loop() {
		if i%2 == 0 {
			eps.Update(slices[5000], &changed)
		} else {
			eps.Update(&changed, slices[5000])
		}
		i++
		var res Result
		snap, res = Next(snap, &svcs, eps, node)
		if len(res.Changed) != 1 {
			b.Fatalf("changed: %v", res.Changed)
		}
	}
}
