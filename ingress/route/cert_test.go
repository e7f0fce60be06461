package route

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/internal/testcert"
)

// selfSigned returns a PEM certificate for names and its PEM key.
func selfSigned(t testing.TB, names ...string) (crt, key []byte) {
	t.Helper()
	p := testcert.SelfSigned(t, names...)
	return p.CertPEM, p.KeyPEM
}

func tlsSecret(ns, name, rv string, crt, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
}

func (s *sources) addSecret(sec *corev1.Secret) {
	s.secrets[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}] = sec
}

// subject names the certificate c was made for, "" for nil.
func subject(c *tls.Certificate) string {
	if c == nil {
		return ""
	}
	return c.Leaf.Subject.CommonName
}

func TestCertificates(t *testing.T) {
	src := newSources()
	src.addService("ns", "web", svcPort("", 80))
	fooCrt, fooKey := selfSigned(t, "foo.com")
	wildCrt, wildKey := selfSigned(t, "*.bar.com")
	leafCrt, leafKey := selfSigned(t, "leaf.org", "*.leaf.org")
	otherCrt, _ := selfSigned(t, "other.com")
	src.addSecret(tlsSecret("ns", "foo", "1", fooCrt, fooKey))
	src.addSecret(tlsSecret("ns", "wild", "1", wildCrt, wildKey))
	src.addSecret(tlsSecret("ns", "leaf", "1", leafCrt, leafKey))
	src.addSecret(tlsSecret("ns", "mismatch", "1", otherCrt, fooKey))
	src.addSecret(tlsSecret("ns", "broken", "1", []byte("not a certificate"), fooKey))
	opaque := tlsSecret("ns", "opaque", "1", fooCrt, fooKey)
	opaque.Type = corev1.SecretTypeOpaque
	src.addSecret(opaque)

	ing := ingress("ns", "a", 0,
		rule("foo.com", hpath("/", prefix, "web")),
		rule("x.bar.com", hpath("/", prefix, "web")),
		rule("leaf.org", hpath("/", prefix, "web")),
		rule("plain.com", hpath("/", prefix, "web")),
		rule("missing.com", hpath("/", prefix, "web")),
	)
	ing.Spec.TLS = []networkingv1.IngressTLS{
		{Hosts: []string{"foo.com"}, SecretName: "foo"},
		{Hosts: []string{"*.bar.com"}, SecretName: "wild"},
		{SecretName: "leaf"},
		{Hosts: []string{"missing.com"}, SecretName: "missing"},
		{Hosts: []string{"mismatch.com"}, SecretName: "mismatch"},
		{Hosts: []string{"broken.com"}, SecretName: "broken"},
		{Hosts: []string{"opaque.com"}, SecretName: "opaque"},
	}
	res := build(src, ing)
	tab := res.Table

	for _, tc := range []struct{ name, want string }{
		{"foo.com", "foo.com"},
		{"FOO.com", "foo.com"},
		{"x.bar.com", "*.bar.com"},
		{"bar.com", ""},
		{"a.x.bar.com", ""},
		{"leaf.org", "leaf.org"},
		{"a.leaf.org", "leaf.org"},
		{"missing.com", ""},
		{"mismatch.com", ""},
		{"unknown.org", ""},
	} {
		if got := subject(tab.Certificate(tc.name)); got != tc.want {
			t.Errorf("Certificate(%q) is for %q, want %q", tc.name, got, tc.want)
		}
	}

	for _, tc := range []struct {
		host            string
		overTLS, wantRe bool
	}{
		{"foo.com", false, true},
		{"foo.com", true, false},
		{"x.bar.com", false, true},
		{"leaf.org", false, true},
		{"missing.com", false, true}, // a TLS host, served with the default certificate
		{"plain.com", false, false},
	} {
		if got := tab.Route(tc.host, "/", tc.overTLS).RedirectHTTPS; got != tc.wantRe {
			t.Errorf("Route(%s, overTLS=%v).RedirectHTTPS = %v, want %v", tc.host, tc.overTLS, got, tc.wantRe)
		}
	}

	var got []string
	for _, p := range res.Problems {
		got = append(got, p.Reason+": "+p.Message)
		if strings.Contains(p.Message, "PRIVATE") || strings.Contains(p.Message, string(fooKey[40:60])) {
			t.Errorf("problem message quotes key material: %s", p.Message)
		}
	}
	want := []string{
		"TLSSecretInvalid: TLS secret ns/missing: not found; serving missing.com with the default certificate",
		"TLSSecretInvalid: TLS secret ns/mismatch: bad certificate or key: tls: private key does not match public key; serving mismatch.com with the default certificate",
		"TLSSecretInvalid: TLS secret ns/broken: bad certificate or key: tls: failed to find any PEM data in certificate input; serving broken.com with the default certificate",
		`TLSSecretInvalid: TLS secret ns/opaque: type is "Opaque", not "kubernetes.io/tls"; serving opaque.com with the default certificate`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
}

func TestSSLRedirectOff(t *testing.T) {
	src := newSources()
	src.addService("ns", "web", svcPort("", 80))
	ing := ingress("ns", "a", 0, rule("foo.com", hpath("/", prefix, "web")))
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"foo.com"}, SecretName: "none"}}
	ing.Annotations = map[string]string{AnnotationSSLRedirect: "false"}
	m := build(src, ing).Table.Route("foo.com", "/", false)
	if m.RedirectHTTPS {
		t.Errorf("RedirectHTTPS with %s=false", AnnotationSSLRedirect)
	}
}

// A changed Secret is parsed again; an unchanged one is reused.
func TestCertificateUpdate(t *testing.T) {
	src := newSources()
	src.addService("ns", "web", svcPort("", 80))
	crt1, key1 := selfSigned(t, "foo.com", "v1.foo.com")
	crt2, key2 := selfSigned(t, "foo.com", "v2.foo.com")
	src.addSecret(tlsSecret("ns", "s", "1", crt1, key1))
	ing := ingress("ns", "a", 0, rule("foo.com", hpath("/", prefix, "web")))
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"foo.com"}, SecretName: "s"}}
	first := Build(Input{Ingresses: []*networkingv1.Ingress{ing}, Sources: src})
	c1 := first.Table.Certificate("foo.com")
	second := Build(Input{Ingresses: []*networkingv1.Ingress{ing}, Sources: src, Previous: first})
	if second.Table.Certificate("foo.com") != c1 {
		t.Errorf("an unchanged Secret was parsed again")
	}
	if !first.UsesSecret(types.NamespacedName{Namespace: "ns", Name: "s"}) {
		t.Errorf("UsesSecret(ns/s) = false")
	}
	src.addSecret(tlsSecret("ns", "s", "2", crt2, key2))
	third := Build(Input{Ingresses: []*networkingv1.Ingress{ing}, Sources: src, Previous: second})
	if got := third.Table.Certificate("foo.com").Leaf.DNSNames[1]; got != "v2.foo.com" {
		t.Errorf("after the Secret changed, the certificate is for %s, want v2.foo.com", got)
	}
}

func TestTLSConflict(t *testing.T) {
	src := newSources()
	src.addService("ns", "web", svcPort("", 80))
	crt1, key1 := selfSigned(t, "old")
	crt2, key2 := selfSigned(t, "new")
	src.addSecret(tlsSecret("ns", "old", "1", crt1, key1))
	src.addSecret(tlsSecret("ns", "new", "1", crt2, key2))
	older := ingress("ns", "older", 0, rule("foo.com", hpath("/a", prefix, "web")))
	older.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"foo.com"}, SecretName: "old"}}
	newer := ingress("ns", "newer", 1, rule("foo.com", hpath("/b", prefix, "web")))
	newer.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"foo.com"}, SecretName: "new"}}
	res := build(src, newer, older)
	if got := subject(res.Table.Certificate("foo.com")); got != "old" {
		t.Errorf("certificate of the older Ingress not kept: got %s", got)
	}
	if len(res.Problems) != 1 || res.Problems[0].Reason != "TLSConflict" || res.Problems[0].Ingress != newer {
		t.Errorf("problems: got %+v, want one TLSConflict on the newer Ingress", res.Problems)
	}
}
