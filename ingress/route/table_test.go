package route

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestHostMatching(t *testing.T) {
	src := newSources()
	for _, s := range []string{"exact", "wild", "any", "deep"} {
		src.addService("ns", s, svcPort("", 80))
	}
	tab := build(src,
		ingress("ns", "a", 0,
			rule("Bar.Foo.com", hpath("/", prefix, "exact")),
			rule("*.foo.com", hpath("/", prefix, "wild")),
			rule("*.bar.foo.com", hpath("/", prefix, "deep")),
			rule("", hpath("/", prefix, "any")),
		)).Table
	cases := []struct {
		name, host, want string
	}{
		{"exact wins over wildcard", "bar.foo.com", "exact(bar.foo.com /)"},
		{"trailing dot", "bar.foo.com.", "exact(bar.foo.com /)"},
		{"wildcard covers one label", "baz.foo.com", "wild(*.foo.com /)"},
		{"wildcard does not cover the bare domain", "foo.com", "any( /)"},
		{"two labels take the deeper wildcard", "x.bar.foo.com", "deep(*.bar.foo.com /)"},
		{"wildcard does not cover two labels", "a.b.foo.com", "any( /)"},
		{"unknown host goes to rules without host", "other.org", "any( /)"},
		{"empty host", "", "any( /)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := routed(tab.Route(tc.host, "/x", false)); got != tc.want {
				t.Errorf("Route(%q) = %s, want %s", tc.host, got, tc.want)
			}
		})
	}
}

// A host's virtual host is final: a request for it that none of its paths
// match does not fall back to the rules without a host (as nginx picks
// one server block per request).
func TestHostWithoutMatchingPathGetsDefault(t *testing.T) {
	src := newSources()
	src.addService("ns", "api", svcPort("", 80))
	src.addService("ns", "any", svcPort("", 80))
	tab := build(src,
		ingress("ns", "a", 0, rule("foo.com", hpath("/api", prefix, "api"))),
		ingress("ns", "b", 1, rule("", hpath("/", prefix, "any"))),
	).Table
	if got := routed(tab.Route("foo.com", "/other", false)); got != "404" {
		t.Errorf("Route(foo.com, /other) = %s, want 404", got)
	}
	// The same for a host written without any path.
	tab = build(src,
		ingress("ns", "a", 0, networkingv1.IngressRule{Host: "foo.com"}),
		ingress("ns", "b", 1, rule("", hpath("/", prefix, "any"))),
	).Table
	if got := routed(tab.Route("foo.com", "/", false)); got != "404" {
		t.Errorf("Route(foo.com, /) with a host without paths = %s, want 404", got)
	}
}

func TestMerging(t *testing.T) {
	src := newSources()
	for _, s := range []string{"old", "new", "other", "d1", "d2"} {
		src.addService("ns", s, svcPort("", 80))
	}
	older := ingress("ns", "older", 0,
		rule("foo.com", hpath("/app", prefix, "old"), hpath("/exact", exact, "old")))
	older.Spec.DefaultBackend = ptr(serviceBackend("d1", 80))
	newer := ingress("ns", "newer", 5,
		rule("foo.com", hpath("/app/", prefix, "new"), hpath("/exact", prefix, "new"), hpath("/more", prefix, "other")))
	newer.Spec.DefaultBackend = ptr(serviceBackend("d2", 80))
	// Same creation time as newer: namespace/name decides, "a" < "newer".
	tie := ingress("ns", "a-tie", 5, rule("foo.com", hpath("/tie", exact, "old")))
	tieLoser := ingress("ns", "z-tie", 5, rule("foo.com", hpath("/tie", exact, "new")))

	// The order given does not matter.
	res := build(src, tieLoser, newer, older, tie)
	tab := res.Table
	for _, tc := range []struct{ path, want string }{
		{"/app/x", "old(foo.com /app)"},     // same host+path+type: older wins
		{"/exact", "old(foo.com /exact)"},   // Exact of older beats Prefix of newer
		{"/exact/x", "new(foo.com /exact)"}, // the newer's Prefix /exact is merged
		{"/more", "other(foo.com /more)"},   // paths only the newer has are merged
		{"/tie", "old(foo.com /tie)"},
		{"/none", "d1( )"}, // the older defaultBackend
	} {
		if got := routed(tab.Route("foo.com", tc.path, false)); got != tc.want {
			t.Errorf("Route(foo.com, %s) = %s, want %s", tc.path, got, tc.want)
		}
	}
	var got []string
	for _, p := range res.Problems {
		got = append(got, p.Ingress.Name+" "+p.Reason+": "+p.Message)
	}
	want := []string{
		`newer DefaultBackendConflict: the defaultBackend of the older Ingress ns/older is used; this one's is ignored`,
		`newer RuleConflict: host foo.com path "/app/" (Prefix) is already served by the older Ingress ns/older; this rule is ignored`,
		`z-tie RuleConflict: host foo.com path "/tie" (Exact) is already served by the older Ingress ns/a-tie; this rule is ignored`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
}

func TestBackends(t *testing.T) {
	src := newSources()
	src.services[types.NamespacedName{Namespace: "ns", Name: "web"}] = &corev1.Service{
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80},
			{Name: "grpc", Port: 9000, AppProtocol: ptr("grpc")},
			{Name: "h2c", Port: 9001, AppProtocol: ptr("kubernetes.io/h2c")},
		}},
	}
	src.slices[types.NamespacedName{Namespace: "ns", Name: "web"}] = []*discoveryv1.EndpointSlice{
		slice("ns", "web", "web-1", discoveryv1.AddressTypeIPv4, "http", 8080, ep("10.0.0.1", nil, nil, nil)),
		slice("ns", "web", "web-2", discoveryv1.AddressTypeIPv4, "grpc", 9090, ep("10.0.0.1", nil, nil, nil)),
	}
	// An ExternalName Service has no endpoints to send requests to, even
	// with a slice of its name made by hand (kube-proxy ignores those too).
	external := types.NamespacedName{Namespace: "ns", Name: "ext"}
	src.services[external] = &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName,
		ExternalName: "www.example.com", Ports: []corev1.ServicePort{{Port: 80}}}}
	src.slices[external] = []*discoveryv1.EndpointSlice{slice("ns", "ext", "ext-1", discoveryv1.AddressTypeIPv4, "", 80, ep("10.0.0.9", nil, nil, nil))}
	byName := func(p, port string) networkingv1.HTTPIngressPath {
		x := hpath(p, prefix, "web")
		x.Backend.Service.Port = networkingv1.ServiceBackendPort{Name: port}
		return x
	}
	byNumber := func(p, svc string, port int32) networkingv1.HTTPIngressPath {
		x := hpath(p, prefix, svc)
		x.Backend.Service.Port.Number = port
		return x
	}
	res := build(src, ingress("ns", "ing", 0, rule("",
		byName("/name", "http"),
		byNumber("/number", "web", 80),
		byName("/grpc", "grpc"),
		byNumber("/h2c", "web", 9001),
		byName("/noport", "nope"),
		byNumber("/nosvc", "missing", 80),
		byNumber("/ext", "ext", 80),
		networkingv1.HTTPIngressPath{Path: "/res", PathType: ptr(prefix), Backend: networkingv1.IngressBackend{
			Resource: &corev1.TypedLocalObjectReference{Kind: "StorageBucket", Name: "static"}}},
	)))
	tab := res.Table
	name, number := tab.Route("x", "/name", false).Backend, tab.Route("x", "/number", false).Backend
	if name.Port != "http" || number.Port != "80" {
		t.Errorf("ports: got %q and %q, want http and 80", name.Port, number.Port)
	}
	if got := name.Endpoints().Ready; !slices.Equal(got, []string{"10.0.0.1:8080"}) {
		t.Errorf("endpoints by port name: got %v, want [10.0.0.1:8080]", got)
	}
	if got := number.Endpoints().Ready; !slices.Equal(got, []string{"10.0.0.1:8080"}) {
		t.Errorf("endpoints by port number: got %v, want [10.0.0.1:8080]", got)
	}
	for p, want := range map[string]Protocol{"/name": HTTP1, "/grpc": H2C, "/h2c": H2C} {
		if got := tab.Route("x", p, false).Backend.Protocol; got != want {
			t.Errorf("%s: protocol %v, want %v", p, got, want)
		}
	}
	if got := tab.Route("x", "/grpc", false).Backend.Endpoints().Ready; !slices.Equal(got, []string{"10.0.0.1:9090"}) {
		t.Errorf("grpc endpoints: got %v, want [10.0.0.1:9090]", got)
	}
	for p, want := range map[string]string{
		"/noport": "503 service ns/web has no port nope",
		"/nosvc":  "503 service ns/missing not found",
		"/ext":    "503 service ns/ext is of type ExternalName (www.example.com); this controller sends requests only to a Service's endpoints",
		"/res":    "503 resource backends are not served by this controller (StorageBucket static)",
	} {
		if got := routed(tab.Route("x", p, false)); got != want {
			t.Errorf("%s: got %s, want %s", p, got, want)
		}
	}
	var reasons []string
	for _, p := range res.Problems {
		reasons = append(reasons, p.Reason)
	}
	if want := []string{"ServicePortNotFound", "ServiceNotFound", "ExternalNameService", "ResourceBackend"}; !slices.Equal(reasons, want) {
		t.Errorf("problems: got %v, want %v", reasons, want)
	}
}

// Rules naming the same Service port share one Backend, and a rebuild
// keeps it, so its endpoints and the server's state for it carry over.
func TestBackendsShared(t *testing.T) {
	src := newSources()
	src.addService("ns", "web", svcPort("", 80))
	ings := []*networkingv1.Ingress{
		ingress("ns", "a", 0, rule("a.com", hpath("/", prefix, "web"))),
		ingress("ns", "b", 1, rule("b.com", hpath("/", prefix, "web"))),
	}
	first := Build(Input{Ingresses: ings, Sources: src})
	a, b := first.Table.Route("a.com", "/", false).Backend, first.Table.Route("b.com", "/", false).Backend
	if a != b {
		t.Fatalf("two rules for one Service port got two Backends")
	}
	second := Build(Input{Ingresses: ings, Sources: src, Previous: first})
	if second.Table.Route("a.com", "/", false).Backend != a {
		t.Errorf("a rebuild replaced an unchanged Backend")
	}
	src.services[types.NamespacedName{Namespace: "ns", Name: "web"}].Spec.Ports[0].AppProtocol = ptr("grpc")
	third := Build(Input{Ingresses: ings, Sources: src, Previous: second})
	if be := third.Table.Route("a.com", "/", false).Backend; be == a || be.Protocol != H2C {
		t.Errorf("a changed Service port kept its old Backend")
	}
}

func TestEndpoints(t *testing.T) {
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	yes, no := ptr(true), ptr(false)
	cases := []struct {
		name           string
		slices         []*discoveryv1.EndpointSlice
		ready, fallbck []string
	}{
		{"unset ready counts as ready", []*discoveryv1.EndpointSlice{
			slice("ns", "web", "s1", v4, "", 80, ep("10.0.0.1", nil, nil, nil))},
			[]string{"10.0.0.1:80"}, nil},
		{"not ready is left out", []*discoveryv1.EndpointSlice{
			slice("ns", "web", "s1", v4, "", 80, ep("10.0.0.1", no, no, nil), ep("10.0.0.2", yes, yes, no))},
			[]string{"10.0.0.2:80"}, nil},
		{"serving and terminating is fallback", []*discoveryv1.EndpointSlice{
			slice("ns", "web", "s1", v4, "", 80, ep("10.0.0.1", no, yes, yes), ep("10.0.0.2", no, no, yes))},
			nil, []string{"10.0.0.1:80"}},
		{"both families, IPv6 bracketed, deduplicated across slices", []*discoveryv1.EndpointSlice{
			slice("ns", "web", "s1", v4, "", 80, ep("10.0.0.2", nil, nil, nil), ep("10.0.0.1", nil, nil, nil)),
			slice("ns", "web", "s2", v4, "", 80, ep("10.0.0.1", nil, nil, nil)),
			slice("ns", "web", "s3", v6, "", 80, ep("fd00::5", nil, nil, nil))},
			[]string{"10.0.0.1:80", "10.0.0.2:80", "[fd00::5]:80"}, nil},
		{"other port names are ignored", []*discoveryv1.EndpointSlice{
			slice("ns", "web", "s1", v4, "metrics", 9100, ep("10.0.0.1", nil, nil, nil))},
			nil, nil},
		{"FQDN slices are ignored", []*discoveryv1.EndpointSlice{
			slice("ns", "web", "s1", discoveryv1.AddressTypeFQDN, "", 80, ep("example.com", nil, nil, nil))},
			nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := endpointsFrom(tc.slices, "")
			if !slices.Equal(e.Ready, tc.ready) || !slices.Equal(e.Fallback, tc.fallbck) {
				t.Errorf("got ready %v fallback %v, want ready %v fallback %v", e.Ready, e.Fallback, tc.ready, tc.fallbck)
			}
		})
	}
}

// An endpoint change replaces the endpoints of the Backend in place: the
// Table, and every rule's Backend pointer, stay the same.
func TestUpdateEndpointsInPlace(t *testing.T) {
	src := newSources()
	src.addService("ns", "web", svcPort("", 80))
	nn := types.NamespacedName{Namespace: "ns", Name: "web"}
	res := build(src, ingress("ns", "a", 0, rule("a.com", hpath("/", prefix, "web")), rule("b.com", hpath("/", prefix, "web"))))
	tab := res.Table
	be := tab.Route("a.com", "/", false).Backend
	if got := be.Endpoints().Ready; len(got) != 0 {
		t.Fatalf("endpoints before any slice: %v", got)
	}
	s := []*discoveryv1.EndpointSlice{slice("ns", "web", "s1", discoveryv1.AddressTypeIPv4, "", 8080, ep("10.0.0.7", nil, nil, nil))}
	if !res.UpdateEndpoints(nn, s) {
		t.Errorf("UpdateEndpoints reported no change")
	}
	if res.UpdateEndpoints(nn, s) {
		t.Errorf("UpdateEndpoints reported a change for the same slices")
	}
	for _, host := range []string{"a.com", "b.com"} {
		if got := tab.Route(host, "/", false).Backend.Endpoints().Ready; !slices.Equal(got, []string{"10.0.0.7:8080"}) {
			t.Errorf("%s after update: %v, want [10.0.0.7:8080]", host, got)
		}
	}
}

func TestInvalidPathsAndOptions(t *testing.T) {
	src := newSources()
	src.addService("ns", "web", svcPort("", 80))
	ing := ingress("ns", "a", 0, rule("a.com",
		hpath("foo", exact, "web"), hpath("bar", prefix, "web"), hpath("/ok", prefix, "web")))
	ing.Annotations = map[string]string{
		AnnotationSSLRedirect:    "yes please",
		AnnotationConnectTimeout: "5",
		AnnotationReadTimeout:    "1m30s",
		AnnotationSendTimeout:    "-3",
	}
	res := build(src, ing)
	m := res.Table.Route("a.com", "/ok", false)
	want := Options{SSLRedirect: true, ConnectTimeout: 5e9, ReadTimeout: 90e9}
	if *m.Options != want {
		t.Errorf("options: got %+v, want %+v", *m.Options, want)
	}
	var got []string
	for _, p := range res.Problems {
		got = append(got, p.Reason+": "+p.Message)
	}
	wantProblems := []string{
		`InvalidAnnotation: annotation portal.dev/ssl-redirect: "yes please" is not true or false; using the default (true)`,
		`InvalidAnnotation: annotation portal.dev/proxy-send-timeout: "-3" is not a positive number of seconds; using the default`,
		`InvalidPath: host a.com: path "foo" of type Exact does not start with /; the rule is ignored`,
		`InvalidPath: host a.com: path "bar" of type Prefix does not start with /; the rule is ignored`,
	}
	if !slices.Equal(got, wantProblems) {
		t.Errorf("problems:\n got %q\nwant %q", got, wantProblems)
	}
	if m := res.Table.Route("a.com", "/x", false); m.Options == nil || *m.Options != DefaultOptions {
		t.Errorf("no match: options %v, want the defaults", m.Options)
	}
}

func TestParseTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // duration or "error"
	}{
		{"60", "1m0s"}, {"0.5", "500ms"}, {"2m", "2m0s"}, {"1h1s", "1h0m1s"},
		{"0", "error"}, {"-1s", "error"}, {"soon", "error"}, {"NaN", "error"}, {"", "error"},
	} {
		d, err := parseTimeout(tc.in)
		got := d.String()
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("parseTimeout(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestZeroTable(t *testing.T) {
	var tab Table
	if m := tab.Route("a.com", "/", false); m.Backend != nil || m.Options == nil {
		t.Errorf("zero Table routed to %v (options %v), want 404 with options", m.Backend, m.Options)
	}
	if c := tab.Certificate("a.com"); c != nil {
		t.Errorf("zero Table has a certificate")
	}
	if !strings.Contains(routed((*Table)(nil).Route("a", "/", false)), "404") {
		t.Errorf("nil Table does not answer 404")
	}
}
