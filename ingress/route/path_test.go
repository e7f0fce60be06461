package route

import (
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestPathMatchingTable holds every row of the path-matching examples of
// the upstream Ingress documentation. Each rule's path goes to its own
// backend; a request that matches none goes to the defaultBackend.
func TestPathMatchingTable(t *testing.T) {
	type p struct {
		path string
		pt   networkingv1.PathType
	}
	cases := []struct {
		name     string
		paths    []p
		requests []string
		want     string // "Type path" of the matching rule, or "default"
	}{
		{"prefix / matches all", []p{{"/", prefix}}, []string{"/", "/foo", "/foo/bar/", "/a/b/c"}, "Prefix /"},
		{"exact /foo matches /foo", []p{{"/foo", exact}}, []string{"/foo"}, "Exact /foo"},
		{"exact /foo not /bar", []p{{"/foo", exact}}, []string{"/bar"}, "default"},
		{"exact /foo not /foo/", []p{{"/foo", exact}}, []string{"/foo/"}, "default"},
		{"exact /foo/ not /foo", []p{{"/foo/", exact}}, []string{"/foo"}, "default"},
		{"prefix /foo matches /foo and /foo/", []p{{"/foo", prefix}}, []string{"/foo", "/foo/"}, "Prefix /foo"},
		{"prefix /foo/ matches /foo and /foo/", []p{{"/foo/", prefix}}, []string{"/foo", "/foo/"}, "Prefix /foo/"},
		{"prefix /aaa/bb not /aaa/bbb", []p{{"/aaa/bb", prefix}}, []string{"/aaa/bbb"}, "default"},
		{"prefix /aaa/bbb matches /aaa/bbb", []p{{"/aaa/bbb", prefix}}, []string{"/aaa/bbb"}, "Prefix /aaa/bbb"},
		{"prefix /aaa/bbb/ ignores trailing slash", []p{{"/aaa/bbb/", prefix}}, []string{"/aaa/bbb"}, "Prefix /aaa/bbb/"},
		{"prefix /aaa/bbb matches trailing slash", []p{{"/aaa/bbb", prefix}}, []string{"/aaa/bbb/"}, "Prefix /aaa/bbb"},
		{"prefix /aaa/bbb matches subpath", []p{{"/aaa/bbb", prefix}}, []string{"/aaa/bbb/ccc"}, "Prefix /aaa/bbb"},
		{"prefix /aaa/bbb not string prefix", []p{{"/aaa/bbb", prefix}}, []string{"/aaa/bbbxyz"}, "default"},
		{"prefix / and /aaa: /aaa wins", []p{{"/", prefix}, {"/aaa", prefix}}, []string{"/aaa/ccc"}, "Prefix /aaa"},
		{"prefix /, /aaa, /aaa/bbb: /aaa/bbb wins", []p{{"/", prefix}, {"/aaa", prefix}, {"/aaa/bbb", prefix}}, []string{"/aaa/bbb"}, "Prefix /aaa/bbb"},
		{"prefix /, /aaa, /aaa/bbb: / for /ccc", []p{{"/", prefix}, {"/aaa", prefix}, {"/aaa/bbb", prefix}}, []string{"/ccc"}, "Prefix /"},
		{"prefix /aaa not /ccc: default backend", []p{{"/aaa", prefix}}, []string{"/ccc"}, "default"},
		{"mixed: Exact preferred", []p{{"/foo", prefix}, {"/foo", exact}}, []string{"/foo"}, "Exact /foo"},
		// Portal's own choices beyond the table.
		{"mixed: prefix for a subpath", []p{{"/foo", exact}, {"/foo", prefix}}, []string{"/foo/x"}, "Prefix /foo"},
		{"implementation specific is prefix", []p{{"/foo", implSpec}}, []string{"/foo/bar"}, "ImplementationSpecific /foo"},
		{"implementation specific not string prefix", []p{{"/foo", implSpec}}, []string{"/foobar"}, "default"},
		{"empty implementation specific is /", []p{{"", implSpec}}, []string{"/anything"}, "ImplementationSpecific "},
		{"dot segments are resolved", []p{{"/admin", exact}, {"/", prefix}}, []string{"/x/../admin", "//admin", "/./admin"}, "Exact /admin"},
		{"empty request path is /", []p{{"/", exact}}, []string{""}, "Exact /"},
		{"paths are case sensitive", []p{{"/foo", prefix}}, []string{"/FOO"}, "default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := newSources()
			src.addService("default", "default", svcPort("", 80))
			var paths []networkingv1.HTTPIngressPath
			for i, x := range tc.paths {
				svc := fmt.Sprintf("s%d", i)
				src.addService("default", svc, svcPort("", 80))
				paths = append(paths, hpath(x.path, x.pt, svc))
			}
			ing := ingress("default", "ing", 0, rule("foo.com", paths...))
			ing.Spec.DefaultBackend = ptr(serviceBackend("default", 80))
			tab := build(src, ing).Table
			for _, req := range tc.requests {
				m := tab.Route("foo.com", req, false)
				got := string(m.PathType) + " " + m.Path
				if m.Backend != nil && m.Backend.Service.Name == "default" {
					got = "default"
				}
				if got != tc.want {
					t.Errorf("Route(foo.com, %q) matched %s, want %s", req, got, tc.want)
				}
			}
		})
	}
}

func TestCleanPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "/"},
		{"/", "/"},
		{"/a/b", "/a/b"},
		{"/a/b/", "/a/b/"},
		{"/a//b", "/a/b"},
		{"/a/./b/", "/a/b/"},
		{"/a/../../b", "/b"},
		{"/a/..", "/"},
		{"a/b", "/a/b"},
		{"/a/.b/..c", "/a/.b/..c"},
	} {
		if got := cleanPath(tc.in); got != tc.want {
			t.Errorf("cleanPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
