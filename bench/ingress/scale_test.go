package main

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

func TestQuantiles(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want string
	}{
		{"none", nil, "n=0"},
		{"one", ms(7), "n=1 p50_ms=7.0 p90_ms=7.0 p99_ms=7.0 max_ms=7.0"},
		{"unsorted", ms(9, 1, 5, 3, 7, 2, 4, 6, 8, 10), "n=10 p50_ms=6.0 p90_ms=10.0 p99_ms=10.0 max_ms=10.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantiles(tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSplitAddr(t *testing.T) {
	for _, tc := range []struct {
		in      string
		host    string
		port    int32
		wantErr bool
	}{
		{"10.244.0.10:8080", "10.244.0.10", 8080, false},
		{"10.244.0.10", "", 0, true},
		{"10.244.0.10:http", "10.244.0.10", 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			host, port, err := splitAddr(tc.in)
			if (err != nil) != tc.wantErr || err == nil && (host != tc.host || port != tc.port) {
				t.Errorf("got %q, %d, %v; want %q, %d, error %v", host, port, err, tc.host, tc.port, tc.wantErr)
			}
		})
	}
}

// The Ingresses the scale run writes route both paths to their own
// Service, by port name, in class portal.
func TestNewIngress(t *testing.T) {
	ing := newIngress("scale", "i3", hostName(3), svcName(3),
		pathRule("/a", networkingv1.PathTypePrefix), pathRule("/b", networkingv1.PathTypeExact))
	if got := *ing.Spec.IngressClassName; got != className {
		t.Errorf("class: got %q, want %q", got, className)
	}
	r := ing.Spec.Rules[0]
	if r.Host != "i3.bench.local" {
		t.Errorf("host: got %q, want i3.bench.local", r.Host)
	}
	for _, p := range r.HTTP.Paths {
		if b := p.Backend.Service; b == nil || b.Name != "s3" || b.Port.Name != "http" {
			t.Errorf("path %s: got backend %+v, want Service s3 port http", p.Path, p.Backend)
		}
	}
}
