package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// pathCase is one request and where it must go: to the Service want
// ("alpha" or "beta") or, when want is a status ("404", "503"), answered
// with it. The rule's host is hostFor's, unless host is set; the request
// goes to reqHost, or the rule's host.
type pathCase struct {
	name          string
	paths         []path
	host, reqHost string
	request       string
	want          string
}

// pathCases are every row of the path-matching table in upstream's
// Ingress documentation (section "Examples"), one case per request path of
// a row, each with a host of its own so that its paths are the only ones
// in play. Where a row's paths are several, they go to different Services,
// so the answer shows which one matched. A row that does not match is a
// 404: none of these hosts has a default backend.
var pathCases = []pathCase{
	{name: "Prefix / matches /", paths: []path{{"/", prefix, "alpha"}}, request: "/", want: "alpha"},
	{name: "Prefix / matches any path", paths: []path{{"/", prefix, "alpha"}}, request: "/any/deep/path", want: "alpha"},
	{name: "Exact /foo matches /foo", paths: []path{{"/foo", exact, "alpha"}}, request: "/foo", want: "alpha"},
	{name: "Exact /foo does not match /bar", paths: []path{{"/foo", exact, "alpha"}}, request: "/bar", want: "404"},
	{name: "Exact /foo does not match /foo/", paths: []path{{"/foo", exact, "alpha"}}, request: "/foo/", want: "404"},
	{name: "Exact /foo/ does not match /foo", paths: []path{{"/foo/", exact, "alpha"}}, request: "/foo", want: "404"},
	{name: "Prefix /foo matches /foo", paths: []path{{"/foo", prefix, "alpha"}}, request: "/foo", want: "alpha"},
	{name: "Prefix /foo matches /foo/", paths: []path{{"/foo", prefix, "alpha"}}, request: "/foo/", want: "alpha"},
	{name: "Prefix /foo/ matches /foo", paths: []path{{"/foo/", prefix, "alpha"}}, request: "/foo", want: "alpha"},
	{name: "Prefix /foo/ matches /foo/", paths: []path{{"/foo/", prefix, "alpha"}}, request: "/foo/", want: "alpha"},
	{name: "Prefix /aaa/bb does not match /aaa/bbb", paths: []path{{"/aaa/bb", prefix, "alpha"}}, request: "/aaa/bbb", want: "404"},
	{name: "Prefix /aaa/bbb matches /aaa/bbb", paths: []path{{"/aaa/bbb", prefix, "alpha"}}, request: "/aaa/bbb", want: "alpha"},
	{name: "Prefix /aaa/bbb/ matches /aaa/bbb, ignoring the trailing slash", paths: []path{{"/aaa/bbb/", prefix, "alpha"}}, request: "/aaa/bbb", want: "alpha"},
	{name: "Prefix /aaa/bbb matches /aaa/bbb/, the trailing slash", paths: []path{{"/aaa/bbb", prefix, "alpha"}}, request: "/aaa/bbb/", want: "alpha"},
	{name: "Prefix /aaa/bbb matches the subpath /aaa/bbb/ccc", paths: []path{{"/aaa/bbb", prefix, "alpha"}}, request: "/aaa/bbb/ccc", want: "alpha"},
	{name: "Prefix /aaa/bbb does not match the string prefix /aaa/bbbxyz", paths: []path{{"/aaa/bbb", prefix, "alpha"}}, request: "/aaa/bbbxyz", want: "404"},
	{name: "Prefix /, /aaa: /aaa/ccc matches /aaa", paths: []path{{"/", prefix, "alpha"}, {"/aaa", prefix, "beta"}}, request: "/aaa/ccc", want: "beta"},
	{name: "Prefix /, /aaa, /aaa/bbb: /aaa/bbb matches /aaa/bbb", paths: []path{{"/", prefix, "alpha"}, {"/aaa", prefix, "alpha"}, {"/aaa/bbb", prefix, "beta"}}, request: "/aaa/bbb", want: "beta"},
	{name: "Prefix /, /aaa, /aaa/bbb: /ccc matches /", paths: []path{{"/", prefix, "beta"}, {"/aaa", prefix, "alpha"}, {"/aaa/bbb", prefix, "alpha"}}, request: "/ccc", want: "beta"},
	{name: "Prefix /aaa does not match /ccc", paths: []path{{"/aaa", prefix, "alpha"}}, request: "/ccc", want: "404"},
	{name: "Mixed /foo Prefix and Exact: /foo prefers Exact", paths: []path{{"/foo", prefix, "alpha"}, {"/foo", exact, "beta"}}, request: "/foo", want: "beta"},
	{name: "Mixed /foo Prefix and Exact: /foo/x takes the Prefix", paths: []path{{"/foo", prefix, "alpha"}, {"/foo", exact, "beta"}}, request: "/foo/x", want: "alpha"},

	// ImplementationSpecific: Portal matches it as Prefix (documented in
	// package ingress/route), as the specification allows.
	{name: "ImplementationSpecific /foo matches /foo/bar, as Prefix", paths: []path{{"/foo", implSpecific, "alpha"}}, request: "/foo/bar", want: "alpha"},
	{name: "ImplementationSpecific /foo does not match /foobar, as Prefix", paths: []path{{"/foo", implSpecific, "alpha"}}, request: "/foobar", want: "404"},

	// Hosts: exact names and a wildcard covering one label.
	{name: "a second host with the same path goes to its own Service", host: "other.paths.test", paths: []path{{"/", prefix, "beta"}}, request: "/", want: "beta"},
	{name: "wildcard *.wild.test matches one label", host: "*.wild.test", reqHost: "bar.wild.test", paths: []path{{"/", prefix, "beta"}}, request: "/", want: "beta"},
	{name: "wildcard *.wild.test does not match two labels", host: "*.wild.test", reqHost: "baz.bar.wild.test", paths: []path{{"/", prefix, "beta"}}, request: "/", want: "404"},
	{name: "wildcard *.wild.test does not match wild.test", host: "*.wild.test", reqHost: "wild.test", paths: []path{{"/", prefix, "beta"}}, request: "/", want: "404"},
	{name: "a host no rule names", host: "other.paths.test", reqHost: "nobody.paths.test", paths: []path{{"/", prefix, "beta"}}, request: "/", want: "404"},

	// A Service without endpoints.
	{name: "a Service with no endpoints answers 503", paths: []path{{"/", prefix, "empty"}}, request: "/", want: "503"},
}

// hostFor is the rule host of case i when the case names none.
func hostFor(i int) string { return fmt.Sprintf("row%d.paths.test", i) }

// pathsIngress is one Ingress holding the rules of every case: two
// Services behind one Ingress, many hosts, Prefix and Exact paths.
func pathsIngress() *networkingv1.Ingress {
	ing := ingress("paths")
	seen := map[string]bool{}
	for i, c := range pathCases {
		host := c.host
		if host == "" {
			host = hostFor(i)
		}
		if !seen[host] {
			seen[host] = true
			ing.Spec.Rules = append(ing.Spec.Rules, rule(host, c.paths...))
		}
	}
	return ing
}

// testPathMatching sends every case's request with curl until all are
// answered as they should be (the controller applies a new Ingress a
// moment after it is created), and reports the cases that never were.
func (ib *ingressBed) testPathMatching(t *testing.T) {
	apply(t, ib.server, pathsIngress())
	var wrong []string
	check := func() (bool, string) {
		wrong = nil
		for i, c := range pathCases {
			host := c.reqHost
			if host == "" {
				host = c.host
			}
			if host == "" {
				host = hostFor(i)
			}
			got := ib.curl("http://" + host + c.request)
			if !c.matches(got) {
				wrong = append(wrong, fmt.Sprintf("%s: GET http://%s%s: got %v, want %s", c.name, host, c.request, got, c.want))
			}
		}
		return len(wrong) == 0, fmt.Sprintf("%d of %d requests routed wrong:\n%s", len(wrong), len(pathCases), strings.Join(wrong, "\n"))
	}
	eventuallyWithin(t, 30*time.Second, "every path-matching case routed right", check)
}

// matches says whether got is the case's wanted answer: a 200 from a pod
// of the wanted Service, or the wanted status.
func (c pathCase) matches(got answer) bool {
	if got.err != nil {
		return false
	}
	if c.want == "alpha" || c.want == "beta" {
		return got.code == 200 && serviceOf(got.backend) == c.want
	}
	return fmt.Sprint(got.code) == c.want && got.backend == ""
}

// testClassAndStatus: the IngressClass portal exists and is the default,
// a new Ingress without a class gets it, and the controller's address is
// in status.loadBalancer and in `kubectl get ingress`, an address where
// the Ingress answers.
func (ib *ingressBed) testClassAndStatus(t *testing.T) {
	ctx := context.Background()
	class, err := ib.c.NetworkingV1().IngressClasses().Get(ctx, "portal", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get IngressClass portal: %v", err)
	}
	if class.Spec.Controller != "portal.dev/ingress" || class.Annotations[networkingv1.AnnotationIsDefaultIngressClass] != "true" {
		t.Errorf("IngressClass portal: got controller %q, annotations %v; want portal.dev/ingress, marked default",
			class.Spec.Controller, class.Annotations)
	}

	noClass := ingress("no-class", rule("no-class.test", path{"/", prefix, "alpha"}))
	noClass.Spec.IngressClassName = nil
	apply(t, ib.server, noClass)
	got, err := ib.c.NetworkingV1().Ingresses("default").Get(ctx, "no-class", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.IngressClassName == nil || *got.Spec.IngressClassName != "portal" {
		t.Errorf("an Ingress created without a class: got spec.ingressClassName %v, want portal", got.Spec.IngressClassName)
	}
	eventuallyWithin(t, 30*time.Second, "the Ingress without a class served", func() (bool, string) {
		a := ib.curl("http://no-class.test/")
		return a.code == 200 && serviceOf(a.backend) == "alpha", fmt.Sprintf("GET http://no-class.test/: got %v, want 200 from alpha", a)
	})

	ib.checkOtherClasses(t)

	// The address: in status, in kubectl's ADDRESS column, and answering.
	var ip string
	eventuallyWithin(t, 30*time.Second, "status.loadBalancer.ingress of the Ingress paths", func() (bool, string) {
		ing, err := ib.c.NetworkingV1().Ingresses("default").Get(ctx, "paths", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		lb := ing.Status.LoadBalancer.Ingress
		if len(lb) == 0 || lb[0].IP == "" {
			return false, fmt.Sprintf("status.loadBalancer.ingress is %v", lb)
		}
		ip = lb[0].IP
		return true, ""
	})
	eventuallyWithin(t, 30*time.Second, "kubectl get ingress shows the ADDRESS", func() (bool, string) {
		out := ib.server.MustKubectl("get", "ingress", "paths")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			return false, out
		}
		// The columns are aligned; HOSTS may hold spaces ("+ 22 more...").
		col := strings.Index(lines[0], "ADDRESS")
		if col < 0 || col >= len(lines[1]) {
			return false, "no ADDRESS column:\n" + out
		}
		address, _, _ := strings.Cut(lines[1][col:], " ")
		return slices.Contains(strings.Split(address, ","), ip), fmt.Sprintf("got ADDRESS %q, want %s:\n%s", address, ip, out)
	})
	if ip != ingressNodeIP {
		t.Errorf("published address: got %s, want the node's %s", ip, ingressNodeIP)
	}
	out, err := ib.router.Run("curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: "+hostFor(0), "http://"+ip+"/")
	if err != nil || out != "200" {
		t.Errorf("GET http://%s/ with Host %s from outside the node: got %q (%v), want 200", ip, hostFor(0), out, err)
	}
}

// testForwardedHeaders: the backend gets the client's Host, and
// X-Forwarded-For/-Proto/-Host and an X-Request-ID from the controller
// (not those the client sent), over plain HTTP and over TLS.
func (ib *ingressBed) testForwardedHeaders(t *testing.T) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: ib.dialNode,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			url := scheme + "://" + hostFor(0) + "/headers"
			// A client's own X-Forwarded headers are replaced.
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Forwarded-For", "192.0.2.7")
			req.Header.Set("X-Forwarded-Proto", "gopher")
			req.Header.Set("X-Forwarded-Host", "elsewhere.test")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", url, err)
			}
			resp.Body.Close()
			want := map[string]string{"Host": hostFor(0), "X-Forwarded-For": "10.100.1.2",
				"X-Forwarded-Proto": scheme, "X-Forwarded-Host": hostFor(0)}
			for h, v := range want {
				if got := resp.Header.Get("X-Seen-" + h); got != v {
					t.Errorf("GET %s: the backend got %s %q, want %q", url, h, got, v)
				}
			}
			if resp.Header.Get("X-Seen-X-Request-Id") == "" {
				t.Errorf("GET %s: the backend got no X-Request-ID", url)
			}
		})
	}
}

// checkOtherClasses: the legacy annotation kubernetes.io/ingress.class
// naming portal is served; an Ingress of another class, by name or by the
// annotation, is not (its host answers 404), and the API server leaves the
// class of an annotated Ingress empty, as upstream's admission does.
func (ib *ingressBed) checkOtherClasses(t *testing.T) {
	legacy := ingress("legacy", rule("legacy.test", path{"/", prefix, "alpha"}))
	legacy.Spec.IngressClassName = nil
	legacy.Annotations = map[string]string{"kubernetes.io/ingress.class": "portal"}
	legacyOther := ingress("legacy-other", rule("legacy-other.test", path{"/", prefix, "alpha"}))
	legacyOther.Spec.IngressClassName = nil
	legacyOther.Annotations = map[string]string{"kubernetes.io/ingress.class": "nginx"}
	other := ingress("other-class", rule("other-class.test", path{"/", prefix, "alpha"}))
	other.Spec.IngressClassName = ptr.To("nginx")
	for _, ing := range []*networkingv1.Ingress{legacy, legacyOther, other} {
		apply(t, ib.server, ing)
	}
	got, err := ib.c.NetworkingV1().Ingresses("default").Get(context.Background(), "legacy-other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.IngressClassName != nil {
		t.Errorf("an Ingress with the annotation kubernetes.io/ingress.class: got spec.ingressClassName %q, want none", *got.Spec.IngressClassName)
	}
	eventuallyWithin(t, 30*time.Second, "only the Ingresses of class portal served", func() (bool, string) {
		var wrong []string
		for host, want := range map[string]int{"legacy.test": 200, "legacy-other.test": 404, "other-class.test": 404} {
			if a := ib.curl("http://" + host + "/"); a.code != want {
				wrong = append(wrong, fmt.Sprintf("GET http://%s/: got %v, want %d", host, a, want))
			}
		}
		return len(wrong) == 0, strings.Join(wrong, "; ")
	})
}

// testDefaultBackend: an Ingress with only a defaultBackend takes the
// requests no rule matches: the upstream table's row "Prefix /aaa, request
// /ccc: no, uses default backend", and hosts no rule names. Deleted, they
// are 404 again.
func (ib *ingressBed) testDefaultBackend(t *testing.T) {
	row := slices.IndexFunc(pathCases, func(c pathCase) bool { return c.name == "Prefix /aaa does not match /ccc" })
	urls := []string{"http://" + hostFor(row) + "/ccc", "http://nobody.paths.test/"}
	fallback := ingress("fallback")
	fallback.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "beta",
		Port: networkingv1.ServiceBackendPort{Number: 80}}}
	apply(t, ib.server, fallback)
	check := func(want string) func() (bool, string) {
		return func() (bool, string) {
			var wrong []string
			for _, url := range urls {
				a := ib.curl(url)
				if ok := (want == "beta" && a.code == 200 && serviceOf(a.backend) == "beta") || (want == "404" && a.code == 404); !ok {
					wrong = append(wrong, fmt.Sprintf("GET %s: got %v, want %s", url, a, want))
				}
			}
			return len(wrong) == 0, strings.Join(wrong, "; ")
		}
	}
	eventuallyWithin(t, 30*time.Second, "unmatched requests to the defaultBackend", check("beta"))
	if a := ib.curl("http://" + hostFor(0) + "/"); a.code != 200 || serviceOf(a.backend) != "alpha" {
		t.Errorf("GET http://%s/ beside a defaultBackend: got %v, want 200 from alpha (its rule)", hostFor(0), a)
	}
	ib.server.MustKubectl("delete", "ingress", "fallback")
	eventuallyWithin(t, 30*time.Second, "unmatched requests 404 again", check("404"))
}
