package route

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// TLS belongs to a host, not to the Ingress that lists it: a path another
// Ingress adds to a TLS host without spec.tls is redirected to HTTPS too,
// as ingress-nginx does (its TLS is per server block). Pins the bug where
// http://foo.com/b was served plain.
func TestRedirectIsPerHost(t *testing.T) {
	src := newSources()
	src.addService("ns", "web", svcPort("", 80))
	withTLS := ingress("ns", "a", 0,
		rule("foo.com", hpath("/a", prefix, "web")),
		rule("*.wild.com", hpath("/a", prefix, "web")))
	withTLS.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"foo.com", "*.wild.com"}, SecretName: "none"}}
	plain := ingress("ns", "b", 1,
		rule("foo.com", hpath("/b", prefix, "web")),
		rule("*.wild.com", hpath("/b", prefix, "web")),
		rule("plain.com", hpath("/b", prefix, "web")))
	off := ingress("ns", "c", 2, rule("foo.com", hpath("/c", prefix, "web")))
	off.Annotations = map[string]string{AnnotationSSLRedirect: "false"}
	tab := build(src, withTLS, plain, off).Table

	for _, tc := range []struct {
		name, host, path string
		overTLS, want    bool
	}{
		{"path of the Ingress with spec.tls", "foo.com", "/a", false, true},
		{"path of another Ingress on the TLS host", "foo.com", "/b", false, true},
		{"same path over TLS", "foo.com", "/b", true, false},
		{"wildcard TLS host, another Ingress's path", "x.wild.com", "/b", false, true},
		{"ssl-redirect=false on the matched rule's Ingress", "foo.com", "/c", false, false},
		{"host no Ingress lists in spec.tls", "plain.com", "/b", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tab.Route(tc.host, tc.path, tc.overTLS).RedirectHTTPS; got != tc.want {
				t.Errorf("Route(%s, %s, overTLS=%v).RedirectHTTPS = %v, want %v", tc.host, tc.path, tc.overTLS, got, tc.want)
			}
		})
	}
}
