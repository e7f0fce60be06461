package route

import (
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// manyIngresses makes n Ingresses, each with its own host, two paths and
// its own Service, as the scale target has.
func manyIngresses(n int) (*sources, []*networkingv1.Ingress) {
	src := newSources()
	ings := make([]*networkingv1.Ingress, n)
	for i := range ings {
		svc := fmt.Sprintf("svc-%d", i)
		src.addService("ns", svc, svcPort("http", 80))
		ings[i] = ingress("ns", fmt.Sprintf("ing-%d", i), i,
			rule(fmt.Sprintf("host-%d.example.com", i),
				hpath("/api", prefix, svc), hpath("/static/app.js", exact, svc)))
	}
	return src, ings
}

func TestRouteDoesNotAllocate(t *testing.T) {
	src, ings := manyIngresses(10)
	tab := build(src, ings...).Table
	for _, p := range []string{"/api/v1/users", "/static/app.js", "/nothing"} {
		if n := testing.AllocsPerRun(100, func() { tab.Route("host-3.example.com", p, false) }); n != 0 {
			t.Errorf("Route(%s) allocates %v times", p, n)
		}
	}
}

func BenchmarkBuild1000Ingresses(b *testing.B) {
	src, ings := manyIngresses(1000)
	prev := build(src, ings...)
	b.ReportAllocs()
	for b.Loop() {
		prev = Build(Input{Ingresses: ings, Sources: src, Previous: prev})
	}
}

func BenchmarkRoute(b *testing.B) {
	src, ings := manyIngresses(1000)
	tab := build(src, ings...).Table
	b.ReportAllocs()
	for b.Loop() {
		tab.Route("host-500.example.com", "/api/v1/users", false)
	}
}
